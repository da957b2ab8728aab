import type { Deleted, Page } from '../schemas/common.js';
import type {
  CreateScheduleRequest, ListScheduleRunsQuery, ListSchedulesQuery, Schedule, ScheduleRun, UpdateScheduleRequest,
} from '../schemas/schedules.js';
import type { PageIterator } from './paging.js';
import { Resource, seg } from './resource.js';
import type { CallSettings } from './transport.js';

/** `/schedules`: transfers run on a cron timetable in a time zone. */
export class SchedulesApi extends Resource {
  list(query?: ListSchedulesQuery, s?: CallSettings): Promise<Page<Schedule>> { return this.page('/schedules', query, s); }
  all(query?: ListSchedulesQuery, s?: CallSettings): PageIterator<Schedule> { return this.pager('/schedules', query, s); }
  get(id: string, s?: CallSettings): Promise<Schedule> { return this.data('GET', `/schedules/${seg(id)}`, s); }
  create(body: CreateScheduleRequest, s?: CallSettings): Promise<Schedule> { return this.data('POST', '/schedules', { ...s, json: body }); }
  /** The fields given change; a given `transfer` replaces the whole transfer. */
  update(id: string, body: UpdateScheduleRequest, s?: CallSettings): Promise<Schedule> {
    return this.data('PUT', `/schedules/${seg(id)}`, { ...s, json: body });
  }
  delete(id: string, s?: CallSettings): Promise<Deleted> { return this.remove(`/schedules/${seg(id)}`, s); }
  /** Runs the schedule now (overlap applies); resolves with the run as it started, without waiting for its transfer. */
  run(id: string, s?: CallSettings): Promise<ScheduleRun> { return this.data('POST', `/schedules/${seg(id)}/run`, s); }
  /** The schedule's runs, newest first. */
  runs(id: string, query?: ListScheduleRunsQuery, s?: CallSettings): Promise<Page<ScheduleRun>> { return this.page(`/schedules/${seg(id)}/runs`, query, s); }
  allRuns(id: string, query?: ListScheduleRunsQuery, s?: CallSettings): PageIterator<ScheduleRun> { return this.pager(`/schedules/${seg(id)}/runs`, query, s); }
}
