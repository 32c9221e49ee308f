import { writeFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import openapiTS, { astToString, type OpenAPI3 } from 'openapi-typescript'
import { openApiDocument } from '../src/http/openapi.ts'

export const SCHEMA_FILE = new URL('./schema.ts', import.meta.url)
const HEADER =
  '// Generated from the API document by `npm run client:generate` (openapi-typescript); do not edit.\n// test/client.test.ts fails when this file and the document disagree.\n\n'

/** The TypeScript types of the API document, as `client/schema.ts` holds them. */
export async function clientSchemaSource(): Promise<string> {
  const ast = await openapiTS(openApiDocument() as unknown as OpenAPI3)
  return HEADER + astToString(ast)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await writeFile(SCHEMA_FILE, await clientSchemaSource())
}
