import { apacheDav } from './apache-dav.service.js';
import { blob } from './azurite.service.js';
import { clamd } from './clamd.service.js';
import { nfs } from './ganesha.service.js';
import { fileshare } from './azure-files-fake.service.js';
import { onedrive } from './graph-fake.service.js';
import { mongodb } from './mongodb.service.js';
import { smb, smbSigned } from './samba.service.js';
import { s3 } from './s3.service.js';
import { sftp } from './sshd.service.js';
import { ftp } from './vsftpd.service.js';
import { webdav } from './webdav.service.js';
import type { ServiceDefinition } from './types.js';

/** Every service `npm run services` and the jest setup know, by name. A new service: one file, one line here. */
export const SERVICES: readonly ServiceDefinition[] = [mongodb, sftp, s3, ftp, webdav, apacheDav, blob, fileshare, smb, smbSigned, nfs, onedrive, clamd];

/** The definition named `name`; throws listing the known names otherwise. */
export function serviceDefinition(name: string): ServiceDefinition {
  const found = SERVICES.find((s) => s.name === name);
  if (!found) throw new Error(`unknown service "${name}" (known: ${SERVICES.map((s) => s.name).join(', ')})`);
  return found;
}
