import { SealpostError } from '../errors/sealpost-error.ts'

/**
 * A template that cannot render with sample values (`loadTemplates`): its message names the
 * template and the cause, no secret in either. Its own module, so the entry points can name it
 * without loading Handlebars.
 */
export class TemplateError extends SealpostError {
  override name = 'TemplateError'
}
