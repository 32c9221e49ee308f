import { setFlagsFromString } from 'node:v8'

/**
 * Imported first by src/bin/worker.ts, before the rest of the worker loads. A worker draining a
 * backlog flat out allocates fast, and most of each message's objects live long enough (the send,
 * the group commit) to be promoted, so the old generation fills with garbage; V8's default
 * heap-growing factor (up to 4× the live set after each full GC) lets the heap grow to several
 * times the live set (docs/performance.md has the figures).
 * Growing the limit by 30 % over the live set keeps the heap near what is live at the cost of
 * more frequent full GCs. Not a cap: the heap still grows to whatever is live. The young
 * generation's size can only be set at start-up: the Procfile starts the worker with
 * `--max-semi-space-size=8` (8 MB semi-spaces instead of V8's 16 MB), which lowers the peak RSS
 * under load.
 */
setFlagsFromString('--heap-growing-percent=30')
