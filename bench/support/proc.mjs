// Figures the benches read from /proc (memory, CPU) and the machine's load.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';

export const log = (msg) => process.stderr.write(`bench: ${msg}\n`);

/** Peak resident memory (VmHWM) of a running process, in MiB. */
export function peakRssMiB(pid) {
  return statusKiB(pid, 'VmHWM') / 1024;
}

/**
 * Resets a process's peak resident memory (VmHWM) to its resident memory now (`5` to
 * /proc/PID/clear_refs, Linux 4.0+), so a later peakRssMiB is the peak of what ran in between.
 */
export function resetPeakRss(pid) {
  writeFileSync(`/proc/${pid}/clear_refs`, '5');
}

/** Resident memory (VmRSS) of a running process now, in MiB. */
export function rssMiB(pid) {
  return statusKiB(pid, 'VmRSS') / 1024;
}

function statusKiB(pid, field) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? NaN);
}

/** CPU seconds (user + system) a running process has used so far. */
export function cpuSeconds(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ');
  // After the command name: utime and stime are the 12th and 13th fields (in clock ticks, 100 a second on Linux).
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/**
 * CPU seconds (user + system) of every process now, by pid, with its command name: two snapshots
 * give what each process (sshd, versitygw, FerretDB, someone else's tests) used in between, for
 * where the machine's CPU went. sshd's count those of its reaped children too: a session's
 * processes (sftp-server among them) end with it, before the second snapshot. A process that
 * started and ended in between is missed.
 */
export function cpuSnapshot() {
  const snapshot = new Map();
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const comm = /\((.*)\) /.exec(stat)?.[1] ?? '?';
      const f = stat.replace(/^.*\) /, '').split(' ');
      const children = comm === 'sshd' ? Number(f[13]) + Number(f[14]) : 0;
      snapshot.set(Number(pid), { comm, seconds: (Number(f[11]) + Number(f[12]) + children) / 100 });
    } catch {
      // Gone meanwhile.
    }
  }
  return snapshot;
}

/** CPU seconds used between two snapshots, by name (`names` names some pids; others go by command), largest first. */
export function cpuBetween(before, after, names = {}) {
  const used = new Map();
  for (const [pid, { comm, seconds }] of after) {
    const delta = seconds - (before.get(pid)?.seconds ?? 0);
    if (delta <= 0) continue;
    const name = names[pid] ?? comm;
    used.set(name, (used.get(name) ?? 0) + delta);
  }
  return [...used].sort((a, b) => b[1] - a[1]);
}

/**
 * The machine's CPU time so far (/proc/stat's first line, in clock ticks): busy (everything but
 * idle and iowait) and total. Two readings give how busy all cores were in between: near 100%,
 * the copy shared a saturated machine (its servers, the agent, the proxy), whatever each end alone
 * can do.
 */
export function machineCpu() {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const total = f.reduce((a, b) => a + b, 0);
  return { busy: total - f[3] - (f[4] ?? 0), total };
}

/** Percent of the machine's CPU used between two `machineCpu` readings. */
export const busyPercent = (a, b) => (100 * (b.busy - a.busy)) / Math.max(1, b.total - a.total);

/** The 1, 5 and 15 minute load averages, for the report (the machine is shared). */
export const load = () => loadavg().map((l) => l.toFixed(2)).join(' ');
