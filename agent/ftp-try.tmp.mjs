import { Client } from 'basic-ftp';
const e = process.env;
for (const secure of [false, true]) {
  const c = new Client(10000);
  await c.access({ host: e.XFER_TEST_FTP_HOST, port: +e.XFER_TEST_FTP_PORT, user: e.XFER_TEST_FTP_USER, password: e.XFER_TEST_FTP_PASSWORD, secure, secureOptions: { rejectUnauthorized: false } });
  console.log('pwd', await c.pwd());
  await c.cd(e.XFER_TEST_FTP_ROOT);
  await c.send('MKD ünï cödé ' + secure).catch(x => console.log('mkd', x.message));
  const { Readable } = await import('node:stream');
  await c.uploadFrom(Readable.from([Buffer.from('hello')]), 'ünï cödé ' + secure + '/日本 語 🎉.txt');
  console.log(await c.list());
  await c.cd('ünï cödé ' + secure); console.log(await c.list());
  console.log(await c.size('日本 語 🎉.txt'));
  console.log(await c.send('SIZE ' + e.XFER_TEST_FTP_ROOT).catch(x => [x.code, x.message]));
  console.log(await c.send('MDTM ' + e.XFER_TEST_FTP_ROOT).catch(x => [x.code, x.message]));
  console.log(await c.send('CWD /nope').catch(x => [x.code, x.message]));
  console.log(await c.send('RNFR /nope').catch(x => [x.code, x.message]));
  console.log(await c.send('DELE /nope').catch(x => [x.code, x.message]));
  console.log(await c.send('RMD /nope').catch(x => [x.code, x.message]));
  console.log(await c.send('MKD /nope/a').catch(x => [x.code, x.message]));
  console.log(await c.send('MKD ' + e.XFER_TEST_FTP_READONLY_DIR + '/a').catch(x => [x.code, x.message]));
  console.log(await c.send('STOR ' + e.XFER_TEST_FTP_READONLY_DIR + '/a').catch(x => [x.code, x.message]));
  console.log(await c.send('DELE ' + e.XFER_TEST_FTP_READONLY_DIR + '/file.txt').catch(x => [x.code, x.message]));
  console.log(await c.send('SIZE /etc/shadow').catch(x => [x.code, x.message]));
  console.log('tls', c.ftp.socket.getPeerCertificate?.().fingerprint256);
  c.close();
}
const c = new Client(10000);
await c.access({ host: e.XFER_TEST_FTP_HOST, port: +e.XFER_TEST_FTP_PORT, user: e.XFER_TEST_FTP_USER, password: 'wrong' }).catch(x => console.log('bad', x.code, x.message));
