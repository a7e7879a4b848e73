// Reads every *.gguf of a directory with @huggingface/gguf (an independent parser, from
// npm, pinned in package-lock.json) and prints one JSON line per file:
// {"name", "parsed": true|false, "error"?: message, "tensors"?: count}.
//   node differential.mjs DIR
import { readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { gguf } from "@huggingface/gguf";

const dir = resolve(process.argv[2]);
for (const file of readdirSync(dir).filter((f) => f.endsWith(".gguf")).sort()) {
    const name = file.slice(0, -5);
    try {
        const out = await gguf(join(dir, file), { allowLocalFile: true });
        console.log(JSON.stringify({ name, parsed: true, tensors: out.tensorInfos.length }));
    } catch (e) {
        console.log(JSON.stringify({ name, parsed: false, error: String(e && e.message ? e.message : e).slice(0, 200) }));
    }
}
