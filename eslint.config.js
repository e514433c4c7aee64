// ESLint flat config: the recommended JS and typescript-eslint sets, and three type-aware rules
// about promises (a promise nobody awaits loses its rejection). `npm run lint`.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// SQL statements as they start: select/insert/update/delete/with, and transaction control.
const SQL = String.raw`/^\s*(select\s|insert\s+into\s|update\s+\w+\s+set\s|delete\s+from\s|with\s+\w+\s+as\s*\(|begin\b|commit\b|rollback\b)/i`;

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', 'coverage/', 'var/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  // Plain JavaScript run by node (TypeScript files get these names from @types/node).
  { files: ['**/*.mjs', '**/*.cjs'], languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } } },
  { files: ['**/*.cjs'], languageOptions: { sourceType: 'commonjs', globals: { module: 'writable', require: 'readonly' } } },
  {
    // SQL lives in src/db (ARCHITECTURE.md): SQL text or a .query() call anywhere else in the
    // service is an error. Tests and benchmarks may read the database directly.
    files: ['src/**/*.ts', 'jobs/**/*.ts', 'main/**/*.ts'],
    ignores: ['src/db/**'],
    rules: {
      'no-restricted-syntax': [
        'error',
        { selector: `Literal[value=${SQL}]`, message: 'SQL belongs in src/db: add a function there and call it.' },
        { selector: `TemplateElement[value.raw=${SQL}]`, message: 'SQL belongs in src/db: add a function there and call it.' },
        { selector: "CallExpression[callee.property.name='query']", message: 'Queries run in src/db: add a function there and call it.' },
      ],
    },
  },
  {
    // Type-aware: the project service reads tsconfig.json (test/openapi has its own) for the whole
    // run. Only the promise rules, not the whole type-checked set.
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      // A Fastify reply is a thenable that only says when the response went out: sending it and
      // moving on loses nothing.
      '@typescript-eslint/no-floating-promises': ['error', { allowForKnownSafePromises: [{ from: 'package', name: 'FastifyReply', package: 'fastify' }] }],
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
    },
  },
  {
    languageOptions: { ecmaVersion: 2023, sourceType: 'module' },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      'no-console': 'off',
    },
  },
);
