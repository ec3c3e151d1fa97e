/**
 * The markdown tables of one section of a docs page, for the tests that hold a page's
 * tables to the code (operator/public-api/api-rules.test.ts, persona-rules.test.ts): the
 * doc is the source, the test follows it, so a table that lies fails.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

const DOCS = join(__dirname, '..', '..', 'docs');

/**
 * The rows of every table in `section` (a `## ` heading, up to the next one) of
 * `docs/<page>`, each a list of trimmed cells, header first, separator rows left out.
 *
 * @throws Error when the page has no such section.
 */
export async function sectionTables(page: string, section: string): Promise<string[][][]> {
  const text = await readFile(join(DOCS, page), 'utf8');
  const start = text.indexOf(section);
  if (start < 0) throw new Error(`docs/${page} has no "${section}" section`);
  const end = text.indexOf('\n## ', start + section.length);
  const tables: string[][][] = [];
  let current: string[][] | undefined;
  for (const line of text.slice(start, end < 0 ? undefined : end).split('\n')) {
    if (!line.startsWith('|')) {
      current = undefined;
      continue;
    }
    const cells = line
      .slice(1, -1)
      .split('|')
      .map((cell) => cell.trim());
    if (cells.every((cell) => /^-+$/u.test(cell))) continue;
    if (current === undefined) {
      current = [];
      tables.push(current);
    }
    current.push(cells);
  }
  return tables;
}

/**
 * The table of `section` whose first header cell is `header`: its columns and rows.
 *
 * @throws Error when there is none.
 */
export async function docTable(
  page: string,
  section: string,
  header: string,
): Promise<{ columns: string[]; rows: string[][] }> {
  const found = (await sectionTables(page, section)).find((t) => t[0]?.[0] === header);
  if (found === undefined) {
    throw new Error(`no table with a "${header}" column in docs/${page}, ${section}`);
  }
  const [columns = [], ...rows] = found;
  return { columns, rows };
}
