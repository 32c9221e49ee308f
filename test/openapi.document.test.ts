import { expect } from 'chai'
import { execFile } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import type { Express } from 'express'
import knex from 'knex'
import { createApp, type WebDeps } from '../src/http/app.ts'
import { openApiDocument } from '../src/http/openapi.ts'
import { capturingLogger } from './support/helpers.ts'

type Layer = { route?: { path: string; methods: Record<string, boolean> }; handle: { stack?: Layer[] }; slash?: boolean; rawPath?: unknown }

/** Every method and path Express routes, walking nested routers (the pages are middleware, not routes). */
function registeredRoutes(app: Express): string[] {
  const found: string[] = []
  const walk = (stack: Layer[], prefix: string) => {
    for (const layer of stack) {
      if (layer.route) {
        for (const method of Object.keys(layer.route.methods).filter((m) => m !== '_all'))
          found.push(`${method.toUpperCase()} ${prefix}${layer.route.path}`)
      } else if (layer.handle.stack) {
        walk(layer.handle.stack, layer.slash ? prefix : `${prefix}${String(layer.rawPath)}`)
      }
    }
  }
  walk((app as unknown as { router: { stack: Layer[] } }).router.stack, '')
  return found.sort()
}

/** An app wired to a database it never reaches: building routes touches nothing. */
function offlineApp(): Express {
  const db = knex({ client: 'pg' })
  const challenges = { boss: {}, outboxKey: Buffer.alloc(32), codeHashKey: Buffer.alloc(32), clock: () => new Date() }
  return createApp({
    db,
    challenges,
    invitations: challenges,
    logger: capturingLogger().logger,
    clientLimitPerMinute: 60,
    apiDocs: true,
    // The hooks are mounted only where configured (docs/hooks.md): configured here, they are registered.
    hooks: { supabase: { signingKey: Buffer.alloc(32) }, kratos: { apiKey: 'k'.repeat(32) } },
  } as unknown as WebDeps)
}

type Doc = {
  paths: Record<string, Record<string, { operationId?: string; tags?: string[]; security?: unknown; responses: Record<string, unknown> }>>
}

async function lint(document: unknown): Promise<{ code: number; output: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'sealpost-openapi-'))
  try {
    await writeFile(join(dir, 'openapi.json'), JSON.stringify(document))
    const cli = join(import.meta.dirname, '..', 'node_modules', '@redocly', 'cli', 'bin', 'cli.js')
    // Telemetry and the update check off: the lint runs without a network.
    const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' }
    try {
      const { stdout, stderr } = await promisify(execFile)(
        process.execPath,
        [cli, 'lint', '--extends', 'recommended-strict', '--format', 'stylish', 'openapi.json'],
        { cwd: dir, env },
      )
      return { code: 0, output: stdout + stderr }
    } catch (error) {
      const failed = error as { code: number; stdout: string; stderr: string }
      return { code: failed.code, output: failed.stdout + failed.stderr }
    }
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

describe('the OpenAPI document', () => {
  const doc = openApiDocument() as unknown as Doc
  const documented = Object.entries(doc.paths)
    .flatMap(([path, item]) => Object.keys(item).map((method) => `${method.toUpperCase()} ${path.replace(/\{([^}]+)\}/g, ':$1')}`))
    .sort()

  it('describes every route Express registers, and nothing else', () => {
    expect(documented).to.deep.equal(registeredRoutes(offlineApp()))
  })

  it('gives every operation a unique id, a tag, its security and its problem answers', () => {
    const operations = Object.values(doc.paths).flatMap((item) => Object.values(item))
    const ids = operations.map((operation) => operation.operationId)
    expect(new Set(ids).size).to.equal(operations.length)
    for (const operation of operations) {
      expect(operation.tags, operation.operationId).to.have.length(1)
      expect(operation.security, operation.operationId).to.be.an('array')
      expect(Object.keys(operation.responses), operation.operationId).to.include.members(['400', '413', '503'])
    }
  })

  it('names the problem codes, headers and security of a staff reissue', () => {
    const reissue = doc.paths['/platform-admin/security-outbox/dead-letters/{messageId}/reissues']!.post! as unknown as {
      security: unknown
      parameters: { in: string; name: string; required: boolean }[]
      responses: Record<
        string,
        {
          headers?: Record<string, unknown>
          content?: Record<string, { schema: { allOf: { properties?: { code?: { enum: string[] } } }[] } }>
        }
      >
    }
    expect(reissue.security).to.deep.equal([{ bearer: [], elevation: [] }])
    expect(reissue.parameters.map((p) => `${p.in}:${p.name}:${p.required}`)).to.have.members([
      'path:messageId:true',
      'header:Idempotency-Key:true',
      'header:X-Elevation-Token:true',
    ])
    expect(reissue.responses['201']!.headers).to.have.key('Idempotent-Replayed')
    const codes = (status: string) =>
      reissue.responses[status]!.content!['application/problem+json']!.schema.allOf[1]!.properties!.code!.enum
    expect(codes('403')).to.have.members(['not_staff', 'elevation_required'])
    expect(codes('409')).to.include.members(['newer_message_exists', 'own_message'])
    expect(codes('400')).to.include('idempotency_key_required')
    expect(codes('422')).to.include('idempotency_key_reused')
    expect(codes('409')).to.include('idempotency_key_in_use')
    expect(doc.paths['/sign-ups']!.post!.responses['429']).to.have.nested.property('headers.Retry-After.required', true)
  })

  it('passes `redocly lint` with the recommended-strict rules, offline', async () => {
    const result = await lint(doc)
    expect(result.output).to.include('Your API description is valid')
    expect(result.code).to.equal(0)
  })

  it('is linted strictly enough to refuse an operation without an id or a success answer', async () => {
    const broken = structuredClone(doc)
    const signUp = broken.paths['/sign-ups']!.post!
    delete signUp.operationId
    for (const status of Object.keys(signUp.responses)) if (status.startsWith('2')) delete signUp.responses[status]
    const result = await lint(broken)
    expect(result.code).to.not.equal(0)
    expect(result.output).to.include('operation-operationId').and.to.include('operation-2xx-response')
  })
})
