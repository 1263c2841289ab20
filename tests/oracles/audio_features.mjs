// audio_features.mjs — oracle for tern's log-mel: runs the npm package @huggingface/transformers'
// Gemma4AudioFeatureExtractor (an independent JavaScript implementation) on raw samples.
//
// usage: node audio_features.mjs IN.f32 OUT.bin [IN2.f32 OUT2.bin ...]
//   IN.f32   little-endian float32 mono samples at 16 kHz
//   OUT.bin  int32 frames, int32 bins, uint8 mask[frames], float32 features[frames][bins]
//            (frames = -1 when the extractor throws; its message goes to stderr)
// One node process handles many signals: importing the package costs more than extracting.
import { readFileSync, writeFileSync } from 'node:fs';
import { Gemma4AudioFeatureExtractor } from '@huggingface/transformers';

const extractor = new Gemma4AudioFeatureExtractor({
    feature_size: 128,
    sampling_rate: 16000,
    frame_length: 320,
    hop_length: 160,
    fft_length: 512,
    min_frequency: 0,
    max_frequency: 8000,
    preemphasis: 0,
    preemphasis_htk_flavor: true,
    mel_floor: 1e-3,
    padding_value: 0,
});

const args = process.argv.slice(2);
if (args.length === 0 || args.length % 2 !== 0) {
    console.error('usage: node audio_features.mjs IN.f32 OUT.bin [IN2.f32 OUT2.bin ...]');
    process.exit(2);
}

for (let i = 0; i < args.length; i += 2) {
    const raw = readFileSync(args[i]);
    const samples = new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + (raw.length & ~3)));
    let frames = -1, bins = 128, mask = new Uint8Array(0), feats = new Float32Array(0);
    try {
        const r = await extractor(samples);
        [, frames, bins] = r.input_features.dims;
        mask = Uint8Array.from(r.input_features_mask.data, (v) => (v ? 1 : 0));
        feats = Float32Array.from(r.input_features.data);
    } catch (e) {
        console.error(`${args[i]}: ${e.message}`);
    }
    const header = new Int32Array([frames, bins]);
    const out = Buffer.concat([
        Buffer.from(header.buffer),
        Buffer.from(mask.buffer, mask.byteOffset, mask.byteLength),
        Buffer.from(feats.buffer, feats.byteOffset, feats.byteLength),
    ]);
    writeFileSync(args[i + 1], out);
}
