import { readdir, readFile } from 'node:fs/promises'
import { basename } from 'node:path'
import ts from 'typescript'

/**
 * The names README.md and docs/ put in backticks, and what the code holds to check them against
 * (the rules: docs/testing.md). Syntax only: one TypeScript parse per file, no program, no type
 * checking.
 */

/** Where code lives: a symbol counts when one of these declares it. */
export const CODE_DIRECTORIES = ['src', 'jobs', 'config', 'test', 'bench', 'migrations', 'client', 'public']
/** A path in backticks is checked when it starts with one of these folders of the repository. */
const REPOSITORY_FOLDERS = [...CODE_DIRECTORIES, 'templates', 'docs', '.ci']
/** A bare file name in backticks (no folder) is checked when it has one of these extensions. */
const CODE_FILE_NAME = /^[\w<>*-][\w.<>*-]*\.(?:ts|js|cjs|mjs|hbs)$/
/** The product's own code: only its strings count as naming something (a test's strings may quote anything). */
const PRODUCT = /^(?:src|jobs|config|migrations|public)\//
const SKIPPED = new Set(['node_modules', '.git', '.data', 'coverage', 'test-artifacts', 'preview'])

const CAMEL = /^[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+$/
const PASCAL = /^[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+$/
const SCREAMING = /^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$/
/** One upper-case word (`FAULTS`, `QUEUES`): checked only when it is the whole span, since prose and SQL are full of them. */
const WORD = /^[A-Z][A-Z0-9]{2,}$/
/** `name()` spans that are the language's, not a symbol of ours (`import()`, `require()`). */
const LANGUAGE_CALLS = new Set(['import', 'require', 'super', 'typeof', 'await'])
const SQL_NAME = /(?<![\w./-])((?:outbox|platform|identity|organization)\.[a-z_][a-z0-9_]*)(?![\w-])/g
/** Names Sealpost gives operators: metrics, group roles, row policies, NOTIFY channels (a histogram's series add a suffix). */
const SEALPOST_NAME = /(?<![\w.-])sealpost_[a-z0-9_]*[a-z0-9](?![\w*-])/g
const SERIES_SUFFIX = /_(?:bucket|count|sum)$/

/** What the repository holds, read once. */
export type CodeIndex = {
  /** Every file and folder (folders end in '/'), forward-slash paths from the root. */
  paths: readonly string[]
  /** Names declared in code: functions, classes, types, enums, variables, parameters, class and type members. */
  declared: ReadonlySet<string>
  /** Keys of object literals (an API's fields in a zod shape, an option passed on). */
  keys: ReadonlySet<string>
  /** Names the product code spells in its strings (see scanCode). */
  spelled: ReadonlySet<string>
  /** Per file: every identifier of its code (declared, imported or used) and the names it spells; comments excluded. */
  identifiersIn: ReadonlyMap<string, ReadonlySet<string>>
  /** `schema.name` words (outbox, platform, identity, organization) in the product's string literals: its SQL. */
  sqlNames: ReadonlySet<string>
  /** `sealpost_…` words in the product's string literals. */
  sealpostNames: ReadonlySet<string>
  /** Environment variables: the config schema's, and those any code reads from `process.env` (or an `env` it was handed). */
  environment: ReadonlySet<string>
  npmScripts: ReadonlySet<string>
  /** External names, each with the reason it is not ours. */
  allowed: ReadonlyMap<string, string>
}

export type NameKind = 'path' | 'symbol' | 'constant' | 'sql' | 'sealpost name' | 'npm script'
export type Finding = { page: string; line: number; kind: NameKind; name: string; problem: string }

/** The page with every fenced block blanked out (line numbers kept): a block is an example, not a claim about the code. */
export function withoutFences(markdown: string): string {
  return markdown.replace(/^[ \t]*(`{3,}|~{3,})[^\n]*\n[\s\S]*?^[ \t]*\1[ \t]*$/gm, (block) => block.replace(/[^\n]/g, ' '))
}

const lineAt = (text: string, offset: number) => text.slice(0, offset).split('\n').length

/** Each inline code span of a page, with the line it starts on. */
export function codeSpans(markdown: string): { text: string; line: number }[] {
  const text = withoutFences(markdown)
  return [...text.matchAll(/(?<!`)(`+)(?!`)([\s\S]*?[^`])\1(?!`)/g)].map((match) => ({
    text: match[2]!.replace(/\s*\n\s*/g, ' ').trim(),
    line: lineAt(text, match.index),
  }))
}

/** The names one code span claims exist: npm scripts, paths, SQL names, symbols and constants. */
export function namesInSpan(span: string): { kind: NameKind; name: string }[] {
  const names: { kind: NameKind; name: string }[] = []
  for (const [, run, bare] of span.matchAll(/\bnpm (?:run ([\w:.-]+)|(start|test)\b)/g))
    names.push({ kind: 'npm script', name: (run ?? bare)! })
  for (const raw of span.split(/[\s,;()'"[\]=]+/)) {
    const token = raw.replace(/^\.\//, '').replace(/[.:]$/, '')
    if (token.includes('…') || token.includes('//')) continue
    if (token.includes('/') ? REPOSITORY_FOLDERS.includes(token.split('/')[0]!) : CODE_FILE_NAME.test(token))
      names.push({ kind: 'path', name: token })
  }
  for (const [, name] of span.matchAll(SQL_NAME)) names.push({ kind: 'sql', name: name! })
  for (const [name] of span.matchAll(SEALPOST_NAME)) names.push({ kind: 'sealpost name', name })
  // Symbols: outside string literals and <placeholders>; not a member after a dot, not part of a-hyphenated-word or a path.
  const code = span.replace(/'[^']*'|"[^"]*"|<[^<>]*>/g, ' ').trim()
  const whole = /^([A-Za-z_$][\w$]*)(?:\(.*\)|\s*=.*)?$/.exec(code)?.[1]
  if (whole !== undefined && WORD.test(whole)) names.push({ kind: 'constant', name: whole })
  if (whole !== undefined && /^[a-z][a-z0-9]*$/.test(whole) && code.startsWith(`${whole}(`) && !LANGUAGE_CALLS.has(whole))
    names.push({ kind: 'symbol', name: whole })
  for (const [name] of code.matchAll(/(?<![\w$.\-/#@:])[A-Za-z_$][\w$]*(?![\w$\-/])/g)) {
    if (SCREAMING.test(name)) names.push({ kind: 'constant', name })
    else if (CAMEL.test(name) || PASCAL.test(name)) names.push({ kind: 'symbol', name })
  }
  return names
}

/** A path with `<placeholder>` segments and `*` globs as a pattern over the repository's paths; a bare name matches any folder. */
function pathPattern(path: string): RegExp {
  const body = path
    .split(/(<[^>]*>|\*)/)
    .map((part) => (part === '*' || part.startsWith('<') ? '[^/]*' : part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')))
    .join('')
  return new RegExp(path.includes('/') ? `^${body}$` : `(?:^|/)${body}$`)
}

/** Why the code does not have this name, or undefined when it does. */
export function problemWith(kind: NameKind, name: string, index: CodeIndex): string | undefined {
  if (index.allowed.has(name)) return undefined
  const pattern = kind === 'path' ? pathPattern(name) : undefined
  const known: Record<NameKind, () => boolean> = {
    path: () => index.paths.some((path) => pattern!.test(path)),
    'npm script': () => index.npmScripts.has(name),
    sql: () => index.sqlNames.has(name),
    'sealpost name': () => index.sealpostNames.has(name) || index.sealpostNames.has(name.replace(SERIES_SUFFIX, '')),
    // An upper-case name is a constant or an environment variable; an object's key of that shape is a variable being set.
    constant: () => index.declared.has(name) || index.spelled.has(name) || index.environment.has(name),
    symbol: () => index.declared.has(name) || index.keys.has(name) || index.spelled.has(name),
  }
  if (known[kind]()) return undefined
  return {
    path: 'no such file or folder in the repository',
    'npm script': 'no such script in package.json',
    sql: 'no SQL string of src/, jobs/ or migrations/ names it',
    'sealpost name': 'no string of the product names it (a metric, role, policy or channel)',
    constant: 'declared nowhere in the code, and no environment variable of the config schema or read from process.env',
    symbol: `declared nowhere in ${CODE_DIRECTORIES.join('/, ')}/`,
  }[kind]
}

/**
 * "`name` in `path`", "`name` of `path`", "`name` (`path`" and "`name`, `path`": the page says
 * where a known symbol lives or is used, so that file (a file under that folder; for a bare file
 * name, a file so named) must have it in its code.
 */
function misplaced(page: string, markdown: string, index: CodeIndex): Finding[] {
  const text = withoutFences(markdown)
  return [...text.matchAll(/`([A-Za-z_$][\w$]*)(?:\([^`]*\))?` (?:in \(?|of |\(|, )`([^`\s]+)`/g)].flatMap((match) => {
    const [, name, place] = match as unknown as [string, string, string]
    const symbol = CAMEL.test(name) || PASCAL.test(name) || SCREAMING.test(name)
    if (!symbol || problemWith('symbol', name, index) !== undefined) return []
    if (!namesInSpan(place).some((entry) => entry.kind === 'path')) return []
    const pattern = place.endsWith('/') ? new RegExp(`^${place.replace(/\./g, '\\.')}`) : pathPattern(place)
    const files = [...index.identifiersIn].filter(([path]) => pattern.test(path))
    if (files.length === 0 || files.some(([, names]) => names.has(name))) return []
    const problem = `named as in \`${place}\`, which does not have it in its code`
    return [{ page, line: lineAt(text, match.index), kind: 'symbol' as const, name, problem }]
  })
}

/** Every name of a page that the code does not have, with its line and why. */
export function unknownNames(page: string, markdown: string, index: CodeIndex): Finding[] {
  const findings = codeSpans(markdown).flatMap(({ text, line }) =>
    namesInSpan(text).flatMap(({ kind, name }) => {
      const problem = problemWith(kind, name, index)
      return problem === undefined ? [] : [{ page, line, kind, name, problem }]
    }),
  )
  return [...findings, ...misplaced(page, markdown, index)].sort((a, b) => a.line - b.line)
}

async function walk(dir: string): Promise<string[]> {
  const entries = (await readdir(dir, { withFileTypes: true })).filter((entry) => !SKIPPED.has(entry.name))
  const nested = await Promise.all(
    entries.map(async (entry) => {
      const path = dir === '.' ? entry.name : `${dir}/${entry.name}`
      return entry.isDirectory() ? [`${path}/`, ...(await walk(path))] : [path]
    }),
  )
  return nested.flat()
}

/**
 * What one file's code holds: the names it declares, the keys of its object literals, every
 * identifier, the names it spells as a whole string, a quoted word inside one or a log line's
 * `MARKER:` (a frozen list's values, an event's JSON keys in SQL, a provider's error name it maps),
 * the SQL and `sealpost_…` names in its strings and the `process.env` variables it reads.
 */
function scanCode(path: string, text: string) {
  const kind = path.endsWith('.ts') ? ts.ScriptKind.TS : ts.ScriptKind.JS
  const file = ts.createSourceFile(basename(path), text, ts.ScriptTarget.Latest, false, kind)
  const found = { declared: new Set<string>(), keys: new Set<string>(), identifiers: new Set<string>() }
  const strings = { spelled: new Set<string>(), sql: new Set<string>(), sealpost: new Set<string>(), environment: new Set<string>() }
  // `process.env.X`, or `env.X` where a function was handed the environment (`loadConfig(env)`).
  const isEnv = (node: ts.Expression) => ['process.env', 'env'].includes(node.getText(file))
  const visit = (node: ts.Node): void => {
    if (ts.isIdentifier(node)) found.identifiers.add(node.text)
    if (ts.isStringLiteralLike(node) || ts.isTemplateLiteralToken(node)) {
      for (const [, name] of node.text.matchAll(SQL_NAME)) strings.sql.add(name!)
      for (const [name] of node.text.matchAll(SEALPOST_NAME)) strings.sealpost.add(name)
      if (/^[A-Za-z_$][\w$]*$/.test(node.text)) strings.spelled.add(node.text)
      for (const [name] of node.text.matchAll(/(?<=['"])[A-Za-z_$][\w$]*(?=['"])/g)) strings.spelled.add(name)
      for (const [, marker] of node.text.matchAll(/^([A-Z][A-Z0-9_]{2,}):/g)) strings.spelled.add(marker!)
    }
    const name = (node as { name?: ts.Node }).name
    const imported = ts.isImportSpecifier(node) || ts.isImportClause(node) || ts.isNamespaceImport(node)
    if (ts.isPropertyAssignment(node) || ts.isShorthandPropertyAssignment(node)) {
      if (ts.isIdentifier(node.name)) found.keys.add(node.name.text)
    } else if (name !== undefined && ts.isIdentifier(name) && !imported && !ts.isPropertyAccessExpression(node))
      found.declared.add(name.text)
    if (ts.isPropertyAccessExpression(node) && isEnv(node.expression)) strings.environment.add(node.name.text)
    if (ts.isElementAccessExpression(node) && isEnv(node.expression) && ts.isStringLiteral(node.argumentExpression))
      strings.environment.add(node.argumentExpression.text)
    ts.forEachChild(node, visit)
  }
  visit(file)
  return { ...found, ...strings }
}

/** Reads the repository (the working directory): its paths, and every code file of CODE_DIRECTORIES and the root. */
export async function readCodeIndex(extra: { environment: Iterable<string>; allowed: ReadonlyMap<string, string> }): Promise<CodeIndex> {
  const paths = await walk('.')
  const code = paths.filter(
    (path) => /\.(?:ts|js|cjs|mjs)$/.test(path) && (!path.includes('/') || CODE_DIRECTORIES.includes(path.split('/')[0]!)),
  )
  const scans = await Promise.all(code.map(async (path) => [path, scanCode(path, await readFile(path, 'utf8'))] as const))
  const product = scans.filter(([path]) => PRODUCT.test(path)).map(([, scan]) => scan)
  const all = scans.map(([, scan]) => scan)
  const scripts = (JSON.parse(await readFile('package.json', 'utf8')) as { scripts: Record<string, string> }).scripts
  return {
    paths,
    declared: new Set(all.flatMap((scan) => [...scan.declared])),
    keys: new Set(all.flatMap((scan) => [...scan.keys])),
    spelled: new Set(product.flatMap((scan) => [...scan.spelled])),
    identifiersIn: new Map(scans.map(([path, scan]) => [path, new Set([...scan.identifiers, ...scan.spelled])])),
    sqlNames: new Set(product.flatMap((scan) => [...scan.sql])),
    sealpostNames: new Set(product.flatMap((scan) => [...scan.sealpost])),
    environment: new Set([...extra.environment, ...all.flatMap((scan) => [...scan.environment])]),
    npmScripts: new Set(Object.keys(scripts)),
    allowed: extra.allowed,
  }
}
