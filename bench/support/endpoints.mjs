// The test servers as the ends of a benchmarked copy (bench/transfer-matrix.mjs): for each type
// (sftp, s3, smb, nfs) a run area of its own on the server, the xfer connection and the rclone
// remote to it (directly or through a WAN proxy, `net`), the agent's own connector to it (for
// the solo ceilings), a reference client where one exists, and counting and removing what a
// copy wrote. `net.route(name, host, port)` resolves with the { host, port } to dial.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { CreateBucketCommand, DeleteBucketCommand, DeleteObjectsCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { createConnector } from '../../agent/dist/connectors/index.js';
import { writeBigFile, writeSmallFiles } from './files.mjs';
import { log } from './proc.mjs';

/** Dialled as is (loopback). */
export const LOOPBACK = { name: 'loopback', route: async (_name, host, port) => ({ host, port: Number(port) }) };

/** The services each endpoint type needs (ensureServices names). */
export const SERVICES = { sftp: ['sftp'], s3: ['s3'], smb: ['smb'], nfs: ['nfs'] };

/**
 * The files of a case below `dir`: `small` (count × bytes, `perDir` to a directory, as
 * writeSmallFiles lays them out) or one file `dir/<dir>.bin`.
 */
export function manifest(dir, { count = 1, bytes, perDir = 1000 }) {
  if (count === 1) return [{ path: `${dir}/${dir}.bin`, size: bytes }];
  return Array.from({ length: count }, (_, i) => ({ path: `${dir}/d${Math.floor(i / perDir)}/f${i}.bin`, size: bytes }));
}

/** Writes a case's files below `root` (a local directory). */
async function writeCase(root, dir, spec) {
  if ((spec.count ?? 1) === 1) await writeBigFile(join(root, dir, `${dir}.bin`), spec.bytes);
  else writeSmallFiles(join(root, dir), spec.count, spec.bytes, spec.perDir ?? 1000);
}

/** Runs a command, resolving with its seconds; stdin from `input` (a Readable) when given. */
export async function timed(cmd, args, { env = process.env, input } = {}) {
  const t0 = process.hrtime.bigint();
  const child = spawn(cmd, args, { env, stdio: [input ? 'pipe' : 'ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr = (stderr + d).slice(-5000); });
  if (input) {
    child.stdin.on('error', () => {}); // the exit code tells
    input.pipe(child.stdin);
  }
  const code = await new Promise((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`${cmd} ${args.slice(0, 2).join(' ')} failed (${code}): ${stderr}`);
  return Number(process.hrtime.bigint() - t0) / 1e9;
}

/** `bytes` of generated data (one random MiB over and over: nothing on disk, nothing big in memory). */
export function generated(bytes) {
  const block = randomBytes(1024 * 1024);
  return Readable.from((function* () {
    for (let left = bytes; left > 0; left -= block.length) yield block.subarray(0, Math.min(block.length, left));
  })(), { objectMode: false });
}

/** Files and bytes below a local directory. */
function countLocal(dir) {
  let files = 0;
  let bytes = 0;
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(d, e.name));
      else if (e.isFile()) {
        files++;
        bytes += statSync(join(d, e.name)).size;
      }
    }
  };
  try {
    walk(dir);
  } catch (err) {
    if (err.code !== 'ENOENT') throw err;
  }
  return { files, bytes };
}

/** Connection settings as the agent gets them (the API body is the same without id and agent_id). */
const settings = (name, type, host, port, path, options, credentials) => ({ id: randomBytes(12).toString('hex'), name, type, host, port, path, options, agent_id: null, credentials });
export const apiBody = ({ id: _id, agent_id: _agent, ...body }) => body;

/**
 * A run area below a server's local root (sftp, smb, nfs serve directories of this machine),
 * owned like the root so the server's user may write in it.
 */
function localArea(root, name) {
  const area = join(root, name);
  mkdirSync(area, { recursive: true });
  const { uid, gid } = statSync(root);
  chownSync(area, uid, gid);
  return {
    area,
    async seed(dir, spec) {
      await writeCase(area, dir, spec);
      spawnSync('chown', ['-R', `${uid}:${gid}`, join(area, dir)]);
    },
    count: async (dir) => countLocal(join(area, dir)),
    remove: async (dir) => rmSync(join(area, dir), { recursive: true, force: true }),
    close: async () => rmSync(area, { recursive: true, force: true }),
  };
}

/**
 * One endpoint of `type` on the test servers (`e` holds their XFER_TEST_* variables); `name`
 * names its run area (a directory, or for s3 a bucket). `rclone` is the rclone binary.
 */
export async function endpoint(type, e, name, rclone) {
  const obscure = (p) => spawnSync(rclone, ['obscure', p], { encoding: 'utf8' }).stdout.trim();
  if (type === 'sftp') {
    const local = localArea(e.XFER_TEST_SFTP_ROOT, name);
    const creds = { username: e.XFER_TEST_SFTP_USER, password: e.XFER_TEST_SFTP_PASSWORD };
    const to = (net) => net.route('sftp', e.XFER_TEST_SFTP_HOST, e.XFER_TEST_SFTP_PORT);
    return {
      type, ...local,
      async settings(net) {
        const { host, port } = await to(net);
        return settings(`${name}-sftp-${net.name}`, 'sftp', host, port, local.area, {}, creds);
      },
      async rclone(net, dir) {
        const { host, port } = await to(net);
        return { config: { TYPE: 'sftp', HOST: host, PORT: String(port), USER: creds.username, PASS: obscure(creds.password) }, path: join(local.area, dir) };
      },
      /** OpenSSH `sftp get` to /dev/null (key auth; the password is for xfer and rclone). */
      async referenceRead(net, path) {
        const { host, port } = await to(net);
        const input = Readable.from([`get ${join(local.area, path)} /dev/null\n`]);
        return { client: 'OpenSSH sftp', seconds: await timed('sftp', ['-q', '-i', e.XFER_TEST_SFTP_KEY_FILE, '-P', String(port), '-o', 'StrictHostKeyChecking=no',
          '-o', 'UserKnownHostsFile=/dev/null', '-o', 'LogLevel=ERROR', '-b', '-', `${creds.username}@${host}`], { input }) };
      },
    };
  }
  if (type === 'smb') {
    const local = localArea(e.XFER_TEST_SMB_ROOT, name);
    const creds = { username: e.XFER_TEST_SMB_USER, password: e.XFER_TEST_SMB_PASSWORD };
    const share = e.XFER_TEST_SMB_SHARE;
    const to = (net) => net.route('smb', e.XFER_TEST_SMB_HOST, e.XFER_TEST_SMB_PORT);
    // smbclient's credentials through a 0600 file, out of the process list.
    const auth = join(tmpdir(), `xfer-bench-smb-${name}`);
    writeFileSync(auth, `username = ${creds.username}\npassword = ${creds.password}\n`, { mode: 0o600 });
    return {
      type, ...local,
      async settings(net) {
        const { host, port } = await to(net);
        return settings(`${name}-smb-${net.name}`, 'smb', host, port, `/${share}/${name}`, {}, creds);
      },
      async rclone(net, dir) {
        const { host, port } = await to(net);
        return { config: { TYPE: 'smb', HOST: host, PORT: String(port), USER: creds.username, PASS: obscure(creds.password) }, path: `${share}/${name}/${dir}` };
      },
      /** Samba's `smbclient get` to /dev/null. */
      async referenceRead(net, path) {
        const { host, port } = await to(net);
        return { client: 'smbclient', seconds: await timed('smbclient', [`//${host}/${share}`, '-p', String(port), '-A', auth, '-E', '-c', `get ${name}/${path} /dev/null`]) };
      },
      async close() {
        rmSync(auth, { force: true });
        await local.close();
      },
    };
  }
  if (type === 'nfs') {
    const local = localArea(e.XFER_TEST_NFS_ROOT, name);
    // NFS is dialled directly even in a WAN run: the proxy stands before sftp, s3 and smb (the
    // agent's share-side protocols sit next to it by design).
    return {
      type, ...local,
      settings: async (net) => settings(`${name}-nfs-${net.name}`, 'nfs', e.XFER_TEST_NFS_HOST, Number(e.XFER_TEST_NFS_PORT), `${e.XFER_TEST_NFS_EXPORT}/${name}`,
        { mount_port: String(e.XFER_TEST_NFS_MOUNT_PORT) }, { uid: 0, gid: 0 }),
      // rclone has no NFS client: it reads the exported directory on this machine.
      rclone: async (_net, dir) => ({ config: { TYPE: 'local' }, path: join(local.area, dir), note: 'local dir (rclone has no nfs backend)' }),
      referenceRead: null,
    };
  }
  if (type === 's3') {
    const s3 = new S3Client({
      endpoint: e.XFER_TEST_S3_ENDPOINT, region: 'us-east-1', forcePathStyle: true,
      credentials: { accessKeyId: e.XFER_TEST_S3_ACCESS_KEY, secretAccessKey: e.XFER_TEST_S3_SECRET_KEY },
    });
    const bucket = name;
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    const to = (net) => net.route('s3', e.XFER_TEST_S3_HOST, e.XFER_TEST_S3_PORT);
    const keys = async function* (prefix) {
      let token;
      do {
        const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
        yield* page.Contents ?? [];
        token = page.NextContinuationToken;
      } while (token);
    };
    const rcloneOf = async (net) => {
      const { host, port } = await to(net);
      return { TYPE: 's3', PROVIDER: 'Other', ENDPOINT: `http://${host}:${port}`, ACCESS_KEY_ID: e.XFER_TEST_S3_ACCESS_KEY,
        SECRET_ACCESS_KEY: e.XFER_TEST_S3_SECRET_KEY, FORCE_PATH_STYLE: 'true', REGION: 'us-east-1' };
    };
    const self = {
      type, bucket,
      async settings(net) {
        const { host, port } = await to(net);
        return settings(`${name}-s3-${net.name}`, 's3', host, port, `/${bucket}`, { secure: false, force_path_style: true },
          { access_key_id: e.XFER_TEST_S3_ACCESS_KEY, secret_access_key: e.XFER_TEST_S3_SECRET_KEY, region: 'us-east-1' });
      },
      rclone: async (net, dir) => ({ config: await rcloneOf(net), path: `${bucket}/${dir}` }),
      /** Written locally, then uploaded by rclone (the local copy is removed). */
      async seed(dir, spec) {
        const stage = join(tmpdir(), `xfer-bench-stage-${name}`);
        try {
          await writeCase(stage, dir, spec);
          await timed(rclone, ['copy', join(stage, dir), `s:${bucket}/${dir}`, '--transfers', '16', '--s3-upload-concurrency', '4'],
            { env: { ...process.env, ...prefixed('S', await rcloneOf(LOOPBACK)) } });
        } finally {
          rmSync(stage, { recursive: true, force: true });
        }
      },
      /** `rclone cat` to nowhere. */
      async referenceRead(net, path) {
        return { client: 'rclone cat', seconds: await timed(rclone, ['cat', `s:${bucket}/${path}`], { env: { ...process.env, ...prefixed('S', await rcloneOf(net)) } }) };
      },
      client: s3,
      count: (dir) => self.countPrefix(`${dir}/`),
      /** Objects and bytes under a key prefix (directory markers, which xfer writes, are not files). */
      async countPrefix(prefix) {
        let files = 0;
        let bytes = 0;
        for await (const o of keys(prefix)) {
          if (o.Key.endsWith('/')) continue;
          files++;
          bytes += o.Size ?? 0;
        }
        return { files, bytes };
      },
      async remove(dir) {
        let batch = [];
        const flush = async () => {
          if (batch.length) await s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: batch, Quiet: true } }));
          batch = [];
        };
        // Listed first, deleted after: deleting while paging would skip keys.
        const all = [];
        for await (const o of keys(dir ? `${dir}/` : undefined)) all.push({ Key: o.Key });
        for (const k of all) {
          batch.push(k);
          if (batch.length === 1000) await flush();
        }
        await flush();
      },
      async close() {
        try {
          await self.remove('');
          await s3.send(new DeleteBucketCommand({ Bucket: bucket }));
        } catch (err) {
          log(`could not remove bucket ${bucket}: ${err.message}`);
        }
        s3.destroy();
      },
    };
    return self;
  }
  throw new Error(`no bench endpoint for ${type}`);
}

/** rclone's environment for a remote named `remote` (RCLONE_CONFIG_<REMOTE>_<KEY>). */
export function prefixed(remote, config) {
  return Object.fromEntries(Object.entries(config).map(([k, v]) => [`RCLONE_CONFIG_${remote}_${k}`, v]));
}

/** The agent's own connector for an endpoint (its default tuning, as the agent builds it). */
export async function agentConnector(ep, net) {
  return createConnector(await ep.settings(net));
}

/** Runs `fn` over `items`, `concurrency` at a time. */
export async function pool(items, concurrency, fn) {
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, async () => {
    while (next < items.length) await fn(items[next++]);
  }));
}
