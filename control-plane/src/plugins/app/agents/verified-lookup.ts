import type { FastifyBaseLogger } from 'fastify';
import { CloseCodes, MAX_VERIFIED_QUERY_BYTES, type AgentMessage } from '@xfer/shared';
import type { TransfersService } from '../transfers/index.js';
import type { AgentSession } from './session.js';

type VerifiedQuery = Extract<AgentMessage, { type: 'job.verified.query' }>['payload'];

/**
 * Answers an agent's `job.verified.query` (docs/architecture.md "Resume lookup"): of the paths it
 * names, those an earlier attempt of the job recorded `copied`. Only for a job this session runs
 * now: its current attempt is the bound (results of the run itself, or of a later one, never
 * count), and the results are read within the agent's own account. A query about any other job
 * (never given to this agent, another account's, finished, taken over, cancelled meanwhile) is
 * answered with no files: the run asking is being stopped anyway, and an empty answer only makes
 * it follow the overwrite policy, which reveals nothing. Paths past MAX_VERIFIED_QUERY_BYTES
 * together break the protocol (the agent batches below it) and close the session.
 * A read: nothing is written.
 */
export async function answerVerifiedQuery(session: AgentSession, query: VerifiedQuery, transfers: TransfersService, log: FastifyBaseLogger): Promise<void> {
  let bytes = 0;
  for (const path of query.paths) bytes += Buffer.byteLength(path);
  if (bytes > MAX_VERIFIED_QUERY_BYTES) {
    session.close(CloseCodes.protocolError, `job.verified.query: paths longer than ${MAX_VERIFIED_QUERY_BYTES} bytes together`);
    return;
  }
  const attempt = session.jobs.get(query.job_id);
  if (attempt === undefined) {
    log.warn({ agentId: session.agent.id, jobId: query.job_id }, 'verified-files query for a job this agent does not run: answered empty');
    session.send('job.verified', { request_id: query.request_id, files: [] });
    return;
  }
  const files = await transfers.verifiedFiles(query.job_id, session.agent.accountId, attempt, query.paths);
  session.send('job.verified', { request_id: query.request_id, files });
}
