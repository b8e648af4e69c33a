// harden-check's browser (its browser-cross-origin case): loads one page in
// Debian's chromium, headless, driven by puppeteer-core from
// viewer/node_modules (as viewer/test/browser_test.mjs is), waits until the
// page's own script sets window.done, and prints what it recorded
// (window.results) with the page's console messages as one JSON line:
//
//   node scripts/harden-check-browser.mjs URL [CHROMIUM]
//
// The page (served by harden-check from another origin than the viewer's)
// does the cross-origin calls; this script only carries the browser.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const require = createRequire(join(root, 'viewer', 'package.json'));
const puppeteer = require('puppeteer-core');

const [url, chromium = '/usr/bin/chromium'] = process.argv.slice(2);
if (!url) {
  console.error('harden-check-browser: URL is required');
  process.exit(2);
}

const browser = await puppeteer.launch({
  executablePath: chromium,
  headless: true,
  args: ['--no-sandbox', '--no-first-run', '--no-default-browser-check'],
});
try {
  const page = await browser.newPage();
  const messages = [];
  page.on('console', (m) => messages.push(m.text().slice(0, 300)));
  page.on('pageerror', (e) => messages.push(`pageerror: ${e.message}`));
  await page.goto(url, { waitUntil: 'load', timeout: 30000 });
  await page.waitForFunction('window.done === true', { timeout: 60000 });
  const results = await page.evaluate(() => window.results);
  process.stdout.write(`${JSON.stringify({ results, console: messages })}\n`);
} finally {
  await browser.close();
}
