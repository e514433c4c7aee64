// The process tree as /proc shows it, for tests that check what a command left running.
//
// A process is named by its pid and its start time. A pid alone is not a name: the kernel hands a
// freed pid to the next process, and with pid_max at 32768 a long test run wraps around in minutes.
// A test that signalled a remembered pid once killed a backend of the suite's Postgres container
// (its processes are the host's too) and put every other test's database into crash recovery.
import { readdirSync, readFileSync } from 'node:fs';

/** A process as /proc showed it: its pid and when it started (clock ticks after boot). */
export interface Proc {
  pid: number;
  startedAt: number;
}

/** The fields after the command name (which may hold spaces and parentheses), from `state` on; null once gone. */
function statFields(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

// proc(5): state is field 3, ppid 4, starttime 22; the slice starts at field 3.
const PPID = 1;
const STARTTIME = 19;

/** The process running under pid now, or null when there is none. */
export function procOf(pid: number): Proc | null {
  const fields = statFields(pid);
  return fields === null ? null : { pid, startedAt: Number(fields[STARTTIME]) };
}

/** Every process below pid (from /proc), deepest last. */
export function descendants(pid: number): Proc[] {
  const children = new Map<number, Proc[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const fields = statFields(Number(entry));
    if (fields === null) continue; // gone meanwhile
    const ppid = Number(fields[PPID]);
    children.set(ppid, [...(children.get(ppid) ?? []), { pid: Number(entry), startedAt: Number(fields[STARTTIME]) }]);
  }
  const out: Proc[] = [];
  const walk = (p: number) => {
    for (const c of children.get(p) ?? []) {
      out.push(c);
      walk(c.pid);
    }
  };
  walk(pid);
  return out;
}

/** Still running: the same process (not another one given its pid since), and not a zombie. */
export function alive(p: Proc): boolean {
  const fields = statFields(p.pid);
  return fields !== null && Number(fields[STARTTIME]) === p.startedAt && fields[0] !== 'Z';
}

/** Sends the signal when the process still runs; never to a process that took its pid since. */
export function signal(p: Proc, sig: NodeJS.Signals): void {
  if (!alive(p)) return;
  try {
    process.kill(p.pid, sig);
  } catch {
    // ended between the check and the signal
  }
}

/** The process's command line, words joined by spaces ('' once it is gone or its pid is another's). */
export function commandOf(p: Proc): string {
  try {
    const line = readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').split('\0').join(' ');
    return alive(p) ? line : '';
  } catch {
    return '';
  }
}
