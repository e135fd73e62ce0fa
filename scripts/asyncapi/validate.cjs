// Validates AsyncAPI 3.0 documents (JSON or YAML files given as arguments): against the
// official 3.0.0 JSON schema of @asyncapi/specs (with ajv), and with @asyncapi/parser,
// which must report no errors. A `NAME.json` and a `NAME.yaml` given together must hold
// the same document. Exits 1 on any failure. Run by ./check, which installs the pinned
// packages into a cache directory and sets RUSTSTREAM_ASYNCAPI_MODULES to it.
'use strict';

const fs = require('fs');
const path = require('path');
const util = require('util');
const { createRequire } = require('module');

const modules = process.env.RUSTSTREAM_ASYNCAPI_MODULES;
if (!modules) {
  console.error('validate.cjs: run it through scripts/asyncapi/check (RUSTSTREAM_ASYNCAPI_MODULES is not set)');
  process.exit(2);
}
const need = createRequire(path.join(modules, 'package.json'));
const specs = need('@asyncapi/specs');
const { Parser } = need('@asyncapi/parser');
const Ajv = need('ajv');
const addFormats = need('ajv-formats');
const yaml = need('js-yaml');

const SEVERITY = ['error', 'warning', 'information', 'hint'];

async function main(files) {
  if (files.length === 0) {
    console.error('validate.cjs: no documents given');
    return 1;
  }
  const schema = specs.schemas['3.0.0'];
  if (!schema) {
    console.error('validate.cjs: @asyncapi/specs has no 3.0.0 schema');
    return 1;
  }
  // The 3.0.0 schema bundles the draft-07 meta-schema it is written in: ajv's own copy
  // is left out so that the two do not clash.
  const ajv = new Ajv({ strict: false, allErrors: true, meta: false, validateSchema: false });
  addFormats(ajv);
  const validate = ajv.compile(schema);
  const parser = new Parser();
  const loaded = new Map();
  let failed = 0;
  for (const file of files) {
    const text = fs.readFileSync(file, 'utf8');
    let document;
    try {
      document = file.endsWith('.json') ? JSON.parse(text) : yaml.load(text);
    } catch (error) {
      console.error(`${file}: does not load: ${error.message}`);
      failed++;
      continue;
    }
    loaded.set(file, document);
    const problems = [];
    if (!validate(document)) {
      for (const e of validate.errors) {
        problems.push(`schema: ${e.instancePath || '/'} ${e.message} ${JSON.stringify(e.params)}`);
      }
    }
    const { document: parsed, diagnostics } = await parser.parse(text);
    for (const d of diagnostics) {
      const line = `parser ${SEVERITY[d.severity] || d.severity}: ${d.code}: ${d.message} at /${d.path.join('/')}`;
      if (d.severity === 0) {
        problems.push(line);
      } else {
        console.log(`${file}: ${line}`);
      }
    }
    if (!parsed) {
      problems.push('parser: no document');
    }
    if (problems.length > 0) {
      failed++;
      for (const p of problems) console.error(`${file}: ${p}`);
    } else {
      const channels = parsed.channels().length;
      const operations = parsed.operations().length;
      const messages = parsed.components().messages().length;
      console.log(`${file}: valid AsyncAPI ${parsed.version()} (schema and parser): ${channels} channels, ${operations} operations, ${messages} messages`);
    }
  }
  for (const [file, document] of loaded) {
    if (!file.endsWith('.yaml')) continue;
    const twin = file.replace(/\.yaml$/, '.json');
    if (loaded.has(twin)) {
      if (util.isDeepStrictEqual(document, loaded.get(twin))) {
        console.log(`${file}: the same document as ${twin}`);
      } else {
        console.error(`${file}: differs from ${twin}`);
        failed++;
      }
    }
  }
  return failed === 0 ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
