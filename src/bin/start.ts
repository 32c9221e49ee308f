import { apiDocsEnabled } from '../../config/schema.ts'
import { startDevStack } from '../runtime/dev-stack.ts'
import { handleSignals } from '../runtime/signals.ts'
import { main } from './main.ts'

await main('all-in-one', async (config, logger) => {
  const signals = handleSignals(logger)
  const stack = await startDevStack(config, logger)
  signals.stopWith(stack.stop)
  // What it binds, and a URL that works from this machine whatever that is.
  const reach = stack.apiBound.startsWith('0.0.0.0:') || stack.apiBound.startsWith('[::]:') ? ', every interface' : ''
  console.log(`Sealpost API on ${stack.apiUrl} (listening on ${stack.apiBound}${reach})`)
  console.log(`Development index on ${stack.apiUrl}/`)
  if (stack.inboxUrl) console.log(`SES emulator inbox viewer on ${stack.inboxUrl} (this machine only)`)
  console.log(`Phone inbox (SMS and WhatsApp through the local fakes) on ${stack.apiUrl}/dev/phone-inbox (this machine only)`)
  if (apiDocsEnabled(config)) console.log(`API reference on ${stack.apiUrl}/docs/`)
  console.log(`Operator console on ${stack.apiUrl}/platform-admin/ (staff: npm run staff -- grant <identifier>)`)
  console.log('Try: npm run dev:identity -- alice@example.com, then see docs/getting-started.md.')
})
