/**
 * The agent's `max_jobs` slots, shared by everything that counts against it: the jobs it runs
 * (destination sides of relays included) and the source sides of relays it serves.
 */
export class Slots {
  private used = 0;

  constructor(readonly max: number) {}

  /** Takes a slot; false when all are taken. */
  take(): boolean {
    if (this.used >= this.max) return false;
    this.used++;
    return true;
  }

  release(): void {
    if (this.used > 0) this.used--;
  }

  get inUse(): number {
    return this.used;
  }

  /** The refusal sent when no slot is free. */
  busyMessage(): string {
    return `agent busy: already running ${this.used} of max_jobs ${this.max}`;
  }
}
