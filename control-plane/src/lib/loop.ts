/**
 * Runs `fn` every `intervalMs` until stopped, never two runs at once. `wake()` asks for a run as
 * soon as possible (the in-process shortcut when this instance caused the change); the interval
 * is what makes the work happen anyway when another instance caused it.
 */
export class Loop {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = true;

  constructor(
    private readonly fn: () => Promise<void>,
    private readonly intervalMs: number,
    private readonly onError: (err: unknown) => void,
  ) {}

  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  wake(): void {
    if (this.stopped) return;
    if (this.running) this.again = true;
    else this.schedule(0);
  }

  /** Stops the loop and waits for a run in progress to end. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }

  private schedule(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.run(), ms);
    this.timer.unref();
  }

  private async run(): Promise<void> {
    this.timer = null;
    if (this.stopped || this.running) return;
    this.running = this.fn().catch(this.onError);
    await this.running;
    this.running = null;
    if (this.stopped) return;
    const again = this.again;
    this.again = false;
    this.schedule(again ? 0 : this.intervalMs);
  }
}
