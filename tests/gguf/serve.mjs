// The independent readers for tests/gguf/serve.py, one JSON line on stdout:
//   node serve.mjs parse FILE      @huggingface/gguf (tests/gguf/node_modules, pinned) reads
//                                  FILE: version, typed metadata, tensor infos (ggml type
//                                  names from its enum), data offset, parameter count
//   node serve.mjs hub URL NAME    @huggingface/hub's modelInfo (tests/hf/node_modules,
//                                  pinned 2.17.5) of NAME on a tensorgate at URL, asking
//                                  for the `gguf` field (additionalFields: the client's
//                                  types do not declare it, it passes it through)
// BigInts are written as decimal strings.
import { gguf, GGMLQuantizationType } from "@huggingface/gguf";

const text = (v) => (typeof v === "bigint" ? v.toString() : Array.isArray(v) ? v.map(text) : v);
const [mode, arg, name] = process.argv.slice(2);
if (mode === "parse") {
    const out = await gguf(arg, { allowLocalFile: true, typedMetadata: true, computeParametersCount: true });
    const metadata = {};
    for (const [k, v] of Object.entries(out.typedMetadata)) {
        if (k === "version" || k === "tensor_count" || k === "kv_count") continue; // not key-values
        metadata[k] = { type: v.type, subType: v.subType, value: text(v.value) };
    }
    console.log(JSON.stringify({
        version: Number(out.typedMetadata.version.value),
        metadata,
        tensors: out.tensorInfos.map((t) => ({
            name: t.name, shape: t.shape.map(String), dtype: GGMLQuantizationType[t.dtype], offset: String(t.offset),
        })),
        tensorDataOffset: String(out.tensorDataOffset),
        parameterCount: out.parameterCount,
    }));
} else if (mode === "hub") {
    const hubUrl = new URL("../hf/node_modules/@huggingface/hub/dist/index.mjs", import.meta.url);
    const { modelInfo } = await import(hubUrl.href);
    const info = await modelInfo({ name, hubUrl: arg, additionalFields: ["gguf"] });
    console.log(JSON.stringify({ name: info.name, gguf: info.gguf }));
} else {
    console.error("usage: node serve.mjs parse FILE | hub URL NAME");
    process.exit(2);
}
