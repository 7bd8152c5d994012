/**
 * docs/design.md §9 ("Who writes what") holds: every SQL statement is in db/, and each table is
 * written by the one repository module §9 names for it.
 *
 * The test reads the sources, not a database: the string literals of every TypeScript file (the
 * compiler's parser finds them, so comments and prose do not count), and §9's table, parsed from
 * the document itself so that the two cannot drift. A row of §9 names a table (or a table's
 * columns, `hosts.cordoned_at`, where another component writes them) and the module that writes
 * it; every table the schema's migrations create must have a row.
 */
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import ts from 'typescript'
import { REPO_ROOT } from '../../../scripts/tools/paths.js'

/** The product's folders, where no SQL may be written but in db/. */
const PRODUCT_FOLDERS = ['api', 'activities', 'workflows', 'host-agent', 'worker', 'cli', 'config', 'bin', 'domain', 'stack']
const SQL_KEYWORD = /\b(SELECT|INSERT INTO|UPDATE|DELETE FROM|ON CONFLICT)\s/
/** A statement that writes a table, and the table: `DO UPDATE` (an upsert's) and `FOR UPDATE` (a lock) are not. */
const WRITE = /\b(?:INSERT INTO|DELETE FROM|(?<!\b(?:DO|FOR)\s+)UPDATE)\s+(\w+)/g

interface Literal { file: string, line: number, text: string }

function typeScriptFiles (folder: string): string[] {
  return readdirSync(join(REPO_ROOT, folder), { recursive: true, encoding: 'utf8' })
    .filter((path) => path.endsWith('.ts') && !path.endsWith('.d.ts'))
    .map((path) => join(folder, path))
}

/** The text of every string and template literal of the file (a template's substitutions as `…`). */
function stringLiterals (file: string): Literal[] {
  const source = ts.createSourceFile(file, readFileSync(join(REPO_ROOT, file), 'utf8'), ts.ScriptTarget.Latest, true)
  const literals: Literal[] = []
  const visit = (node: ts.Node): void => {
    let text: string | null = null
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) text = node.text
    else if (ts.isTemplateExpression(node)) text = [node.head.text, ...node.templateSpans.map((span) => span.literal.text)].join('…')
    if (text !== null) literals.push({ file, line: source.getLineAndCharacterOfPosition(node.getStart()).line + 1, text })
    ts.forEachChild(node, visit)
  }
  visit(source)
  return literals
}

interface Writer { module: string }

/** §9's rows: each table (and each table's columns written apart) with the module that writes it. */
function writersInDesign (): { tables: Map<string, Writer>, columns: Map<string, Writer> } {
  const design = readFileSync(join(REPO_ROOT, 'docs', 'design.md'), 'utf8')
  const section = /^## 9\. .*$([\s\S]*?)^## /m.exec(design)
  assert.ok(section !== null, 'docs/design.md has a section 9')
  const tables = new Map<string, Writer>()
  const columns = new Map<string, Writer>()
  const rows = section[1]!.split('\n').filter((line) => line.startsWith('|')).slice(2)
  assert.ok(rows.length > 0, 'docs/design.md §9 has a table of writers')
  for (const row of rows) {
    const [what, module] = row.split('|').slice(1, 3).map((cell) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!))
    assert.ok(what !== undefined && what.length > 0, `§9 row names no table: ${row}`)
    assert.ok(module?.length === 1 && /^db\/[\w-]+\.ts$/.test(module[0]!), `§9 row names not one db/ module as the writer: ${row}`)
    for (const name of what) (name.includes('.') ? columns : tables).set(name, { module: module[0]! })
  }
  return { tables, columns }
}

function tablesInSchema (): Set<string> {
  const folder = join(REPO_ROOT, 'db', 'migrations')
  const sql = readdirSync(folder).filter((file) => file.endsWith('.sql')).map((file) => readFileSync(join(folder, file), 'utf8')).join('\n')
  return new Set([...sql.matchAll(/CREATE (?:UNLOGGED )?TABLE (\w+)/g)].map((m) => m[1]!))
}

describe('who writes what (docs/design.md §9)', () => {
  const design = writersInDesign()

  it('lists every table of the schema, and only those', () => {
    assert.deepEqual([...design.tables.keys()].sort(), [...tablesInSchema()].sort())
  })

  it('names, for columns written apart from their row, the module that writes their table', () => {
    for (const [column, writer] of design.columns) {
      const table = design.tables.get(column.split('.')[0]!)
      assert.ok(table !== undefined, `§9 names ${column}, of a table it does not list`)
      assert.equal(writer.module, table.module, `§9 names another module for ${column} than for its table`)
    }
  })

  it('finds SQL only in db/', () => {
    const outside = PRODUCT_FOLDERS.flatMap(typeScriptFiles).flatMap(stringLiterals)
      .filter((literal) => SQL_KEYWORD.test(literal.text))
      .map((literal) => `${literal.file}:${literal.line}: ${literal.text.trim().split('\n')[0]}`)
    assert.deepEqual(outside, [], 'SQL written outside db/')
  })

  it('finds every write of a table in the module §9 names as its writer', () => {
    const misplaced: string[] = []
    for (const literal of typeScriptFiles('db').flatMap(stringLiterals)) {
      for (const [, table] of literal.text.matchAll(WRITE)) {
        const writer = design.tables.get(table!)
        const where = `${literal.file}:${literal.line}`
        if (writer === undefined) misplaced.push(`${where}: writes ${table}, which §9 does not list`)
        else if (writer.module !== literal.file) misplaced.push(`${where}: writes ${table}, whose writer is ${writer.module}`)
      }
    }
    assert.deepEqual(misplaced, [])
  })
})
