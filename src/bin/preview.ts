import path from 'node:path'
import { loadConfig } from '../providers/config.ts'
import { writePreviews } from '../delivery/preview.ts'

// `npm run preview [-- <dir>]`: renders every template with sample values (default: ./preview).
const config = loadConfig(process.env, 'cli')
const dir = path.resolve(process.argv[2] ?? 'preview')
const written = await writePreviews(dir, {
  productName: config.PRODUCT_NAME,
  supportUrl: config.SUPPORT_URL ?? 'https://support.sealpost.test/help',
  defaultLocale: config.DEFAULT_LOCALE,
  otpOriginDomain: config.OTP_ORIGIN_DOMAIN,
})
console.log(`${written.length} renderings written to ${dir} (open ${path.join(dir, 'index.html')})`)
