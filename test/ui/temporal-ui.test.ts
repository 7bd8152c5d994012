/**
 * The Temporal Web UI as an operator uses it, in a real headless Chromium against a real stack:
 * the workflow list filtered by vmplane's `InstanceState` search attribute shows the workflows
 * of the instances in that state and no others, and a workflow's page shows the summary its
 * operation was started with, and a migrate execution's page shows the phase it is in (its
 * current details). Screenshots of the pages are kept in test-output/ui/.
 */
import assert from 'node:assert/strict'
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { chromium, type Browser, type Page } from 'playwright-core'
import { instanceWorkflowId } from '../../domain/ids.js'
import { findChromium } from '../../scripts/tools/chromium.js'
import { REPO_ROOT } from '../../scripts/tools/paths.js'
import { newInstance, waitForInstance, waitForState, type InstanceBody } from '../helpers/instances.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'

const SCREENSHOTS = join(REPO_ROOT, 'test-output', 'ui')
const NAMESPACE = 'default'
/** The UI's own column set for the list, persisted in local storage, plus vmplane's attributes. */
const COLUMNS_STORAGE_KEY = 'namespace-workflow-table-columns'
const COLUMNS = ['Status', 'Workflow ID', 'Type', 'InstanceState', 'Operation', 'HostId', 'Start'].map((label) => ({ label }))
/** Visibility on the dev server lags the workflows a little: reload the list until it catches up. */
const LIST_TIMEOUT_MS = 120_000
const ROW_WAIT_MS = 10_000
/** A migration slow enough to be watched: 256 MiB at 8 MiB/s, about 40 s of precopy. */
const SLOW_MIGRATION = 'console=ttyS0 sim.migration_mib_per_s=8 sim.migration_dirty_mib_per_s=1'

interface Created {
  instance: InstanceBody
  operation: { id: string, workflowId: string, runId: string | null }
}

describe('the Temporal UI', () => {
  let stack: TestStack
  let browser: Browser
  before(async () => {
    const executablePath = await findChromium()
    if (executablePath === null) {
      throw new Error('no Chromium on PATH or at /usr/bin/chromium: `npm test` installs it (scripts/tools/chromium.ts), or run `apt-get install chromium`')
    }
    browser = await chromium.launch({ executablePath })
    stack = await startStack({ hosts: 2 })
  })
  after(async () => {
    await browser?.close()
    await stack?.stop()
  })

  it('filters the workflow list by InstanceState and shows an operation\'s summary', async () => {
    const running = await create('ui-web-1', true)
    const stopped = await create('ui-web-2', false)
    await waitForState(stack, running.instance.id, 'running')
    await waitForState(stack, stopped.instance.id, 'stopped')
    const runningWorkflow = instanceWorkflowId(running.instance.id)
    const stoppedWorkflow = instanceWorkflowId(stopped.instance.id)

    const context = await browser.newContext({ viewport: { width: 1800, height: 900 } })
    // Before the UI's own scripts read it (as a string: the tests compile without the DOM's types).
    const columns = JSON.stringify({ [NAMESPACE]: COLUMNS })
    await context.addInitScript({ content: `localStorage.setItem(${JSON.stringify(COLUMNS_STORAGE_KEY)}, ${JSON.stringify(columns)})` })
    const page = await context.newPage()

    const runningRow = await listedRow(page, 'InstanceState="running"', runningWorkflow)
    assert.match(await runningRow.innerText(), /\brunning\b/, 'the row shows its InstanceState column')
    assert.equal(await rowsOf(page, stoppedWorkflow).count(), 0, 'a stopped instance is not among the running ones')
    await mkdir(SCREENSHOTS, { recursive: true })
    await page.screenshot({ path: join(SCREENSHOTS, 'temporal-ui-workflows.png'), fullPage: true })

    // The other way round, so the filter is shown to select, not merely to list everything.
    await listedRow(page, 'InstanceState="stopped"', stoppedWorkflow)
    assert.equal(await rowsOf(page, runningWorkflow).count(), 0, 'a running instance is not among the stopped ones')

    // The UI (2.42.1) has no list column for a workflow's summary; the workflow's User Metadata
    // tab shows it, rendered as Markdown in a frame of its own.
    assert.ok(running.operation.runId !== null)
    await userMetadataShows(page, runningWorkflow, running.operation.runId, /create ui-web-1 and start it/)
    await page.screenshot({ path: join(SCREENSHOTS, 'temporal-ui-workflow-summary.png') })
    await context.close()
  })

  it('shows a migrate execution with its phase', async () => {
    const created = await create('ui-migrating', true, SLOW_MIGRATION)
    await waitForState(stack, created.instance.id, 'running')
    const migrate = await api(stack).post<Created>(`/v1/instances/${created.instance.id}/migrate`, {})
    assert.equal(migrate.status, 202, JSON.stringify(migrate.body))
    const { workflowId, runId } = migrate.body.operation
    assert.ok(runId !== null)
    await waitForInstance(stack, created.instance.id, (i) => i.state === 'migrating')

    // The phase is the execution's current details, which the UI asks the running workflow for
    // (its metadata query) and shows in the User Metadata tab beside the summary.
    const page = await browser.newPage({ viewport: { width: 1800, height: 900 } })
    await userMetadataShows(page, workflowId, runId, /sending: to host-\d/)
    await mkdir(SCREENSHOTS, { recursive: true })
    await page.screenshot({ path: join(SCREENSHOTS, 'temporal-ui-migrate-phase.png') })
    await page.close()
    const cancel = await api(stack).post(`/v1/instances/${created.instance.id}/migrate/cancel`)
    assert.ok(cancel.status === 202 || cancel.status === 200, JSON.stringify(cancel.body))
  })

  /** Opens an execution's User Metadata tab, reloading until `text` shows there (a loaded machine's UI is slow). */
  async function userMetadataShows (page: Page, workflowId: string, runId: string, text: RegExp): Promise<void> {
    const deadline = Date.now() + LIST_TIMEOUT_MS
    for (;;) {
      await page.goto(`${stack.info.temporalUiUrl}/namespaces/${NAMESPACE}/workflows/${encodeURIComponent(workflowId)}/${runId}/user-metadata`)
      if (await shows(page, text)) return
      if (Date.now() > deadline) throw new Error(`the UI's User Metadata tab of ${workflowId} never showed ${text}`)
    }
  }

  /** Whether the page or any of its frames (the UI renders metadata in frames) shows `text` within a while. */
  async function shows (page: Page, text: RegExp): Promise<boolean> {
    const deadline = Date.now() + ROW_WAIT_MS
    while (Date.now() < deadline) {
      // A frame the UI re-renders meanwhile is detached: it shows nothing.
      for (const frame of page.frames()) if (await frame.getByText(text).count().catch(() => 0) > 0) return true
      await page.waitForTimeout(500)
    }
    return false
  }

  async function create (name: string, start: boolean, cmdline?: string): Promise<Created> {
    const created = await api(stack).post<Created>('/v1/instances', { ...newInstance(name, cmdline), start })
    assert.equal(created.status, 202, JSON.stringify(created.body))
    return created.body
  }

  function listUrl (query: string): string {
    return `${stack.info.temporalUiUrl}/namespaces/${NAMESPACE}/workflows?query=${encodeURIComponent(query)}`
  }

  /** The list's rows for a workflow ID. */
  function rowsOf (page: Page, workflowId: string) {
    return page.locator('tbody tr').filter({ hasText: workflowId })
  }

  /** Opens the list for `query`, reloading until the workflow's row shows; returns the row. */
  async function listedRow (page: Page, query: string, workflowId: string) {
    const deadline = Date.now() + LIST_TIMEOUT_MS
    for (;;) {
      await page.goto(listUrl(query))
      const row = rowsOf(page, workflowId).first()
      try {
        await row.waitFor({ timeout: ROW_WAIT_MS })
        return row
      } catch (err) {
        if (Date.now() > deadline) throw new Error(`${workflowId} never appeared in the Temporal UI's list for ${query}: ${(err as Error).message}`)
      }
    }
  }
})
