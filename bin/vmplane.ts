#!/usr/bin/env node
/**
 * `vmplane`: the command line for the vmplane API (cli/program.ts). Every failure ends here as
 * one line on stderr and an exit code a script can trust; `vmplane --help` lists them.
 */
import { run } from '../cli/program.js'

process.exitCode = await run(process.argv.slice(2))
