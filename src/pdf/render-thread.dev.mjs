// The pool thread's entry when the service runs from its TypeScript sources (tsx, vitest): a
// worker thread does not inherit the parent's TypeScript loader, so load render-thread.ts with
// tsx's API. The compiled build uses render-thread.js directly.
import { tsImport } from 'tsx/esm/api';

const thread = await tsImport('./render-thread.ts', import.meta.url);
export default thread.default;
