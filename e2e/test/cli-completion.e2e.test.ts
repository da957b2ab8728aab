import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliEnv, installXfer, runCli } from './support/cli.js';

/**
 * Shell completion as a user enables it: `xfer autocomplete script bash` evaluated in a real
 * bash, then the completion function bash would call on <TAB>, for topics, verbs and flags.
 */
let home: string;
let bin: string;

beforeAll(() => {
  home = mkdtempSync(join(tmpdir(), 'xfer-completion-'));
  bin = installXfer(home);
});

afterAll(() => rmSync(home, { recursive: true, force: true }));

/** What bash offers for the words typed so far (the last one is being completed). */
function complete(...words: string[]): string[] {
  const script = `eval "$(xfer autocomplete script bash)"
fn=$(complete -p xfer | sed -E 's/.*-F ([^ ]+).*/\\1/')
COMP_WORDS=(xfer "$@"); COMP_CWORD=$#; COMP_LINE="xfer $*"; COMP_POINT=\${#COMP_LINE}
$fn
printf '%s\\n' "\${COMPREPLY[@]}"`;
  const res = spawnSync('bash', ['-c', script, 'complete', ...words], {
    env: { PATH: `${bin}:${process.env.PATH}`, HOME: home, XDG_CACHE_HOME: join(home, '.cache') },
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (res.status !== 0) throw new Error(`bash exited ${res.status}: ${res.stderr}`);
  return [...new Set(res.stdout.split('\n').filter(Boolean))].sort();
}

test('the setup instructions build the completion cache', () => {
  const res = runCli(['autocomplete', 'bash'], { env: cliEnv(home, { XDG_CACHE_HOME: join(home, '.cache') }) });
  expect(res.status).toBe(0);
  expect(res.stdout).toContain('xfer autocomplete script bash');
});

test('bash completes topics, verbs and flags', () => {
  expect(complete('tra')).toEqual(['transfers']);
  expect(complete('transfers', '')).toEqual(expect.arrayContaining(['cancel', 'create', 'files', 'list', 'run', 'watch']));
  expect(complete('transfers', 'r')).toEqual(['retry', 'run']);
  expect(complete('transfers', 'run', '--so')).toEqual(['--source', '--source-path']);
  expect(complete('connections', 'list', '--')).toEqual(expect.arrayContaining(['--all', '--json', '--limit', '--profile', '--type']));
});
