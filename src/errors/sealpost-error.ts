/**
 * The root of every error class Sealpost defines, in the lowest layer so every layer can extend it:
 * `instanceof SealpostError` tells an error of ours from a library's or the runtime's. Each subclass
 * sets its own `name`, the only part of an error that logs carry besides a problem `code`.
 */
export class SealpostError extends Error {
  override name = 'SealpostError'
}
