// Mastra's own hallucination and toxicity scorers, with `localjudge serve` as their judge
// through the AI SDK's OpenAI-compatible provider. Prints one JSON line per scorer run and
// exits 1 when any run failed. Usage: node mastra_scorers.mjs BASE_URL ITEMS_JSON
import { readFileSync } from 'node:fs';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { createHallucinationScorer, createToxicityScorer } from '@mastra/evals/scorers/prebuilt';
import { Agent, fetch as undiciFetch } from 'undici';

const [baseURL, itemsFile, concurrencyText = '8'] = process.argv.slice(2);
const items = JSON.parse(readFileSync(itemsFile, 'utf8'));
const concurrency = Number(concurrencyText);

// A judge reply's headers come when the whole reply is ready: on a slow host, behind other
// scorers' requests, that can pass fetch's default 300 s headers timeout. The test bounds
// the whole run itself, so no per-request limit here.
const agent = new Agent({ headersTimeout: 0, bodyTimeout: 0 });
const fetch = (url, init) => undiciFetch(url, { ...init, dispatcher: agent });
const provider = createOpenAICompatible({ name: 'localjudge', baseURL, fetch });
const model = provider.chatModel('localjudge');

const jobs = [];
for (const item of items) {
  const run = {
    input: {
      inputMessages: [{ role: 'user', content: item.input }],
      rememberedMessages: [],
      systemMessages: [],
      taggedSystemMessages: {},
    },
    output: [{ role: 'assistant', content: item.output }],
  };
  jobs.push({ id: item.id, scorer: 'hallucination', make: () => createHallucinationScorer({ model, options: { context: item.context } }), run });
  jobs.push({ id: item.id, scorer: 'toxicity', make: () => createToxicityScorer({ model }), run });
}

let failed = 0;
let next = 0;
async function worker() {
  while (next < jobs.length) {
    const job = jobs[next++];
    try {
      const result = await job.make().run(job.run);
      const ok = typeof result.score === 'number' && Number.isFinite(result.score);
      if (!ok) failed++;
      console.log(JSON.stringify({ id: job.id, scorer: job.scorer, ok, score: result.score, reason: String(result.reason).slice(0, 200) }));
    } catch (error) {
      failed++;
      console.log(JSON.stringify({ id: job.id, scorer: job.scorer, ok: false, error: String(error?.message ?? error).slice(0, 500) }));
    }
  }
}
await Promise.all(Array.from({ length: concurrency }, worker));
process.exit(failed ? 1 : 0);
