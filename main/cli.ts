#!/usr/bin/env node
// The `invoice-lifecycle` command (package.json "bin"): one entry for every role, so production
// runs `node dist/main/cli.js <command>` with no npm or tsx between the signal and the process.
const COMMANDS = {
  api: 'the HTTP API',
  worker: 'one worker process (send and reminder queues)',
  migrate: 'create the database if needed and apply pending migrations, then exit',
  start: 'migrations, the API and a worker in one process (local use)',
  demo: 'set up the demo merchant and print its keys and ids as JSON',
} as const;

type Command = keyof typeof COMMANDS;

function usage(): string {
  const lines = Object.entries(COMMANDS).map(([name, what]) => `  ${name.padEnd(8)} ${what}`);
  return `usage: invoice-lifecycle <command>\n\ncommands:\n${lines.join('\n')}\n\nConfiguration comes from the environment (see README "Configuration").\n`;
}

const command = process.argv[2];
if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
  process.stdout.write(usage());
  process.exit(command === undefined ? 1 : 0);
}
if (!Object.hasOwn(COMMANDS, command)) {
  process.stderr.write(`invoice-lifecycle: unknown command "${command}"\n\n${usage()}`);
  process.exit(1);
}
// Each entrypoint runs on import.
await import(`./${command as Command}.js`);
