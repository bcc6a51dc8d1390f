// A one-line progress indicator on stderr for startup work (pipeline compiles, matmul tuning)
// that runs longer than about a second: a silent process for a minute reads as a hung one. Units
// of work of one kind that follow each other within `gapMs` form one activity; once an activity
// has run `thresholdMs`, a TTY sees its line rewritten in place at every unit, and any stream gets
// a summary line when it ends (the next activity, an explicit end(), or process exit). The
// clock is injectable so tests drive it without sleeping.

export interface ProgressSink {
  isTTY?: boolean;
  write(s: string): unknown;
}

export interface ProgressOptions {
  sink: ProgressSink;
  clock?: () => number;
  /** An activity shorter than this prints nothing. */
  thresholdMs?: number;
  /** A unit this long after the previous one starts a new activity. */
  gapMs?: number;
}

interface Activity {
  what: string;
  start: number;
  last: number;
  n: number;
  total?: number;
  detail: string;
  shown: boolean;
  /** Opened by begin(): one activity until end(), whatever the gaps between its units. */
  held: boolean;
}

export class Progress {
  private act: Activity | null = null;
  private readonly clock: () => number;
  private readonly thresholdMs: number;
  private readonly gapMs: number;

  constructor(private readonly o: ProgressOptions) {
    this.clock = o.clock ?? (() => performance.now());
    this.thresholdMs = o.thresholdMs ?? 1000;
    this.gapMs = o.gapMs ?? 1000;
  }

  /**
   * Opens an activity of `what` that lasts until end(): for work whose units are separated by
   * preparation of their own (the tuner's fixtures between shape classes).
   */
  begin(what: string, total?: number): void {
    this.end();
    const now = this.clock();
    this.act = { what, start: now, last: now, n: 0, total, detail: "starting", shown: false, held: true };
  }

  /**
   * One unit of `what` ("compiling pipelines") finished after `ms`, `detail` naming it. `n` and
   * `total` give its place when the caller knows them (n of N); else units are counted.
   */
  unit(what: string, detail: string, ms: number, place: { n?: number; total?: number } = {}): void {
    const now = this.clock();
    // the idle time before this unit began, not its length: a long tuning stage is no gap
    const gap = this.act && !this.act.held && now - ms - this.act.last > this.gapMs;
    if (this.act && (this.act.what !== what || gap)) this.end();
    const a = (this.act ??= { what, start: now - ms, last: now, n: 0, detail, shown: false, held: false });
    a.n = place.n ?? a.n + 1;
    a.total = place.total;
    a.last = now;
    a.detail = detail;
    if (now - a.start < this.thresholdMs) return;
    a.shown = true;
    if (this.o.sink.isTTY) this.o.sink.write(`\r\x1b[K${this.line(a, now)}`);
  }

  /** Ends the current activity: its summary line, if it ran past the threshold. */
  end(): void {
    const a = this.act;
    this.act = null;
    if (!a || !a.shown) return;
    const s = `helios: ${a.what}: ${count(a)} in ${secs(a.last - a.start)}`;
    this.o.sink.write(this.o.sink.isTTY ? `\r\x1b[K${s}\n` : `${s}\n`);
  }

  private line(a: Activity, now: number): string {
    return `helios: ${a.what} ${count(a)} (${a.detail}) ${secs(now - a.start)}`;
  }
}

function count(a: Activity): string {
  return a.total !== undefined ? `${a.n}/${a.total}` : `${a.n}`;
}

function secs(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}
