import { webhookEndpointApi } from './routes/webhook-endpoints.ts'
import { suppressionApi } from './routes/suppressions.ts'
import { auditRecordApi } from './routes/audit-records.ts'
import { peopleApi } from './routes/people.ts'
import { webhookApi } from './routes/webhooks.ts'
import { hookApi } from './routes/hooks.ts'
import { buildDocument } from './openapi/document.ts'
import type { ApiRegistry } from './openapi/registry.ts'
import { accountApi } from './routes/account.ts'
import { healthApi } from './routes/health.ts'
import { identityApi } from './routes/identity.ts'
import { organizationApi } from './routes/organizations.ts'
import { outboxControlsApi } from './routes/outbox-controls.ts'
import { platformAdminApi } from './routes/platform-admin.ts'
import { serviceApi } from './routes/service.ts'
import { apiKeyApi } from './routes/api-keys.ts'
import { courierApi } from './routes/courier.ts'
import { sendCapApi } from './routes/send-caps.ts'

/**
 * Every route module's registry, in the order the document lists their tags. A route is described
 * where it is mounted (`api.add({...})` beside the handler); a new route module adds its registry here.
 */
export const API_REGISTRIES: readonly ApiRegistry[] = [
  identityApi,
  accountApi,
  organizationApi,
  platformAdminApi,
  outboxControlsApi,
  sendCapApi,
  suppressionApi,
  auditRecordApi,
  peopleApi,
  courierApi,
  apiKeyApi,
  webhookEndpointApi,
  webhookApi,
  hookApi,
  healthApi,
  serviceApi,
]

let cached: Record<string, unknown> | undefined

/** The OpenAPI 3.1 document, generated from the same zod schemas the routes validate with. */
export function openApiDocument(): Record<string, unknown> {
  cached ??= buildDocument(API_REGISTRIES)
  return cached
}
