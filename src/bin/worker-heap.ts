import { setFlagsFromString } from 'node:v8'

/**
 * Imported first by src/bin/worker.ts, before the rest of the worker loads. A worker draining a
 * backlog flat out allocates ~100 MB/s, and most of each message's objects live long enough (the
 * send, the group commit) to be promoted, so the old generation fills with garbage; V8's default
 * heap-growing factor (up to 4× the live set after each full GC) then let the heap reach ~150 MB
 * around a ~40 MB live set (peak RSS 250–330 MB, bench/HISTORY.md "The enqueue round").
 * Growing the limit by 30 % over the live set keeps the heap near what is live at the cost of
 * more frequent full GCs (no measurable CPU per message). Not a cap: the heap still grows to
 * whatever is live. The young generation's size can only be set at start-up: the Procfile starts
 * the worker with `--max-semi-space-size=8` (8 MB semi-spaces instead of V8's 16 MB: peak RSS ~15 MB
 * lower under load, bench/HISTORY.md "The enqueue round").
 */
setFlagsFromString('--heap-growing-percent=30')
