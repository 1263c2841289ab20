#!/usr/bin/python3
"""train.py — trains tern's demo models on 2 CPU cores with a fixed seed: a Gemma 4 text model (models/demo), a
two-layer draft model distilled from it (models/demo-draft) and a Gemma 4 assistant drafter trained on its hidden
states and KV cache (models/demo-assistant). Stages, each resumable from its own checkpoint in WORK:

    train.py prepare    corpus, byte-level BPE vocabulary, token stream, held-out text and chats
    train.py target     the chat model
    train.py draft      the two-model drafter (distilled from the target's distribution)
    train.py assistant  the assistant drafter (trained on the target's final hidden states and K/V)
    train.py export     bf16 checkpoints into the repository's models/, float32 ones into WORK/f32
    train.py eval       held-out perplexity as `tern perplexity --ctx 256 --stride 128` computes it
    train.py accept     both drafters' greedy acceptance on held-out chat prompts
    train.py plot       the loss curves, docs/demo-model-loss.png

Run it with Debian's python3 (python3-torch, python3-regex) and libopenblas0: see README.md."""
import argparse
import json
import math
import os
import random
import shutil
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import corpus  # noqa: E402
from gemma4 import (Assistant, Config, Gemma4, assign, causal_mask, load_safetensors, rms_norm,  # noqa: E402
                    save_safetensors, target_config)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
VOCAB = 4096
SEQ = 256
SEED = 1234

SLIDING, FULL = "sliding_attention", "full_attention"
TARGET = Config(vocab=VOCAB, hidden=256, layer_types=[SLIDING, SLIDING, FULL, SLIDING, SLIDING, FULL], heads=4,
                kv_heads=1, head_dim=64, global_head_dim=128, intermediate=512, double_wide=True, ple=16,
                kv_shared=2, window=128)
DRAFT = Config(vocab=VOCAB, hidden=128, layer_types=[SLIDING, FULL], heads=2, kv_heads=1, head_dim=64,
               global_head_dim=128, intermediate=384, window=128)
# The assistant's head dims and KV-head count are the target's: it reads the target's cache as is.
ASSISTANT = Config(vocab=VOCAB, hidden=128, layer_types=[SLIDING, FULL], heads=4, kv_heads=1, head_dim=64,
                   global_head_dim=128, intermediate=384, window=128, softcap=None)
STEPS = {"target": 1400, "draft": 500, "assistant": 500}
BATCH = 16
DRAFT_DEPTH = 3  # assistant training unrolls this many draft steps


def log(work, stage, **kw):
    kw["stage"], kw["time"] = stage, round(time.time(), 1)
    with open(os.path.join(work, "log.jsonl"), "a") as f:
        f.write(json.dumps(kw) + "\n")
    print(json.dumps(kw), flush=True)


def prepare(work):
    docs, held_text, held_chats = corpus.build(SEED)
    merges = bpe.train(docs, VOCAB)
    tok = bpe.Tokenizer(merges, VOCAB)
    with open(os.path.join(work, "tokenizer.json"), "w") as f:
        json.dump(tok.tokenizer_json(), f, ensure_ascii=False)
    stream = np.array([i for d in docs for i in tok.encode(d)], dtype=np.uint16)
    stream.tofile(os.path.join(work, "train.u16"))
    with open(os.path.join(work, "heldout.txt"), "w") as f:
        f.write(held_text)
    with open(os.path.join(work, "heldout-chats.json"), "w") as f:
        json.dump(held_chats, f, indent=0)
    log(work, "prepare", docs=len(docs), train_tokens=int(stream.size), heldout_chars=len(held_text),
        heldout_chats=len(held_chats))


def batches(work, steps, seed):
    """Yields [BATCH, SEQ + 1] windows of the token stream in a seeded order, epoch after epoch."""
    stream = torch.from_numpy(np.fromfile(os.path.join(work, "train.u16"), dtype=np.uint16).astype(np.int64))
    n = (stream.numel() - 1) // SEQ
    g = torch.Generator().manual_seed(seed)
    order, k = torch.randperm(n, generator=g), 0
    for _ in range(steps):
        rows = []
        for _ in range(BATCH):
            if k == n:
                order, k = torch.randperm(n, generator=g), 0
            s = int(order[k]) * SEQ
            rows.append(stream[s:s + SEQ + 1])
            k += 1
        yield torch.stack(rows)


def lr_at(step, total, peak, warmup=50):
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup))))


def train_loop(work, stage, model, loss_fn, peak_lr, seed):
    """Runs STEPS[stage] optimizer steps, checkpointing every 100 so a stopped run resumes where it was."""
    total = STEPS[stage]
    ckpt = os.path.join(work, f"{stage}.pt")
    opt = torch.optim.AdamW(model.parameters(), lr=peak_lr, betas=(0.9, 0.95), weight_decay=0.01)
    start = 0
    if os.path.exists(ckpt):
        st = torch.load(ckpt)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        start = st["step"]
    data = batches(work, total, seed)
    for _ in range(start):
        next(data)
    t0, seen = time.time(), 0
    for step in range(start, total):
        ids = next(data)
        for gr in opt.param_groups:
            gr["lr"] = lr_at(step, total, peak_lr)
        loss = loss_fn(ids)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        seen += ids.numel()
        if step % 20 == 0 or step == total - 1:
            log(work, stage, step=step, loss=round(loss.item(), 4), lr=round(lr_at(step, total, peak_lr), 6),
                tok_per_s=round(seen / (time.time() - t0)))
        if (step + 1) % 100 == 0 or step == total - 1:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step + 1}, ckpt + ".tmp")
            os.replace(ckpt + ".tmp", ckpt)
    return model


def load_stage(work, stage, model):
    model.load_state_dict(torch.load(os.path.join(work, f"{stage}.pt"))["model"])
    return model.eval()


def train_target(work):
    torch.manual_seed(SEED)
    model = Gemma4(TARGET)

    def loss_fn(ids):
        logits, _, _ = model(ids[:, :-1])
        return F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))

    train_loop(work, "target", model, loss_fn, 2e-3, SEED)


def train_draft(work):
    target = load_stage(work, "target", Gemma4(TARGET))
    torch.manual_seed(SEED + 1)
    model = Gemma4(DRAFT)

    def loss_fn(ids):
        with torch.no_grad():
            p = torch.softmax(target(ids[:, :-1])[0].float(), -1)
        logq = torch.log_softmax(model(ids[:, :-1])[0].float(), -1)
        return -(p * logq).sum(-1).mean()  # cross-entropy to the target's distribution (KL up to a constant)

    train_loop(work, "draft", model, loss_fn, 3e-3, SEED + 1)


def assistant_masks(T, window):
    """Query position P sees target cache positions p < P (sliding: also P - p < window)."""
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    return {SLIDING: (j < i) & (i - j < window), FULL: j < i}


def assistant_loss(target, model, ids, depth):
    """Step 0 at query position P feeds (token P, target hidden P-1) and predicts token P+1; step s feeds
    (token P+s, the previous step's post-projection) at the same query position and predicts token P+s+1."""
    T = ids.shape[1] - 1
    with torch.no_grad():
        _, h, kv = target(ids[:, :-1])
        emb = F.embedding(ids, target.embed_tokens) * math.sqrt(TARGET.hidden)
    P = torch.arange(1, T - depth)  # every query position with a previous hidden and `depth` targets after it
    masks = {t: m[1:T - depth] for t, m in assistant_masks(T, TARGET.window).items()}
    hs = h[:, P - 1]
    total = 0.0
    for s in range(depth):
        logits, hs = model.step(emb[:, P + s], hs, P, kv, masks)
        total = total + F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, P + s + 1].reshape(-1))
    return total / depth


def train_assistant(work):
    target = load_stage(work, "target", Gemma4(TARGET))
    for p in target.parameters():
        p.requires_grad_(False)
    torch.manual_seed(SEED + 2)
    model = Assistant(ASSISTANT, TARGET)
    train_loop(work, "assistant", model, lambda ids: assistant_loss(target, model, ids, DRAFT_DEPTH), 3e-3,
               SEED + 2)


def write_checkpoint(out, config, tensors, dtype, work):
    os.makedirs(out, exist_ok=True)
    save_safetensors(os.path.join(out, "model.safetensors"), tensors, dtype)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 2, "eos_token_id": [1, 106], "pad_token_id": 0}, f, indent=2)
    shutil.copy(os.path.join(work, "tokenizer.json"), out)
    shutil.copy(os.path.join(HERE, "chat_template.jinja"), out)
    template = open(os.path.join(HERE, "chat_template.jinja")).read()
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"add_bos_token": True, "add_eos_token": False, "bos_token": "<bos>", "eos_token": "<eos>",
                   "pad_token": "<pad>", "unk_token": "<unk>", "clean_up_tokenization_spaces": False,
                   "model_max_length": 4096, "padding_side": "left", "spaces_between_special_tokens": False,
                   "tokenizer_class": "GemmaTokenizer", "chat_template": template}, f, indent=2)


def export(work):
    target = load_stage(work, "target", Gemma4(TARGET))
    draft = load_stage(work, "draft", Gemma4(DRAFT))
    assistant = load_stage(work, "assistant", Assistant(ASSISTANT, TARGET))
    for dtype, root in (("bfloat16", os.path.join(REPO, "models")), ("float32", os.path.join(work, "f32"))):
        write_checkpoint(os.path.join(root, "demo"), target_config(TARGET, dtype), target.tensors(), dtype, work)
        write_checkpoint(os.path.join(root, "demo-draft"), target_config(DRAFT, dtype), draft.tensors(), dtype,
                         work)
        write_checkpoint(os.path.join(root, "demo-assistant"), assistant.config(dtype), assistant.tensors(), dtype,
                         work)
    log(work, "export", target_params=sum(p.numel() for p in target.parameters()),
        draft_params=sum(p.numel() for p in draft.parameters()),
        assistant_params=sum(p.numel() for p in assistant.parameters()))


def perplexity(model, ids, ctx, stride):
    """tern perplexity's windows: every `stride` tokens a window of `ctx` tokens whose first token is replaced by
    BOS; each token after the previous window's end is scored once."""
    nll, scored, scored_to, w0 = 0.0, 0, 1, 0
    with torch.no_grad():
        while scored_to < len(ids):
            w1 = min(w0 + ctx, len(ids))
            win = torch.tensor([2] + ids[w0 + 1:w1])[None]
            logits = model(win)[0][0].double()
            for p in range(w0, w1 - 1):
                if p + 1 >= scored_to:
                    nll += float(torch.logsumexp(logits[p - w0], 0) - logits[p - w0, ids[p + 1]])
                    scored += 1
            scored_to = w1
            if w1 == len(ids):
                break
            w0 += stride
    return math.exp(nll / scored), scored


def evaluate(work):
    tok = bpe.Tokenizer.from_json(os.path.join(work, "tokenizer.json"))
    text = open(os.path.join(work, "heldout.txt")).read()
    ids = [2] + tok.encode(text)
    out = {"heldout_tokens": len(ids), "ctx": SEQ, "stride": SEQ // 2}
    for dtype in ("float32", "bfloat16"):
        model = Gemma4(TARGET)
        path = os.path.join(work, "f32", "demo") if dtype == "float32" else os.path.join(REPO, "models", "demo")
        assign(model.tensors(), load_safetensors(os.path.join(path, "model.safetensors")))
        ppl, n = perplexity(model.eval(), ids, SEQ, SEQ // 2)
        out[f"ppl_{dtype}"] = round(ppl, 4)
        out["scored"] = n
    log(work, "eval", **out)
    with open(os.path.join(work, "eval.json"), "w") as f:
        json.dump(out, f, indent=2)


def greedy(model, ids, n, stop=(1, 106)):
    """The model's greedy continuation of ids, up to n tokens or a stop token (which is kept)."""
    out = list(ids)
    with torch.no_grad():
        for _ in range(n):
            t = int(model(torch.tensor([out]))[0][0, -1].argmax())
            out.append(t)
            if t in stop:
                break
    return out[len(ids):]


def draft_two_model(draft, seq, P, k):
    return greedy(draft, seq[:P + 1], k, stop=())


def draft_assistant(assistant, emb, h, kv, seq, P, k):
    """k assistant steps from the last token seq[P] and the target's hidden at P-1, all at query position P."""
    masks = {t: m[P:P + 1, :P] for t, m in assistant_masks(P + 1, TARGET.window).items()}
    kv_p = {l: (k_[:, :, :P], v[:, :, :P]) for l, (k_, v) in kv.items()}
    hs, tok, out = h[:, P - 1:P], seq[P], []
    with torch.no_grad():
        for _ in range(k):
            logits, hs = assistant.step(emb[tok][None, None], hs, torch.tensor([P]), kv_p, masks)
            tok = int(logits[0, -1].argmax())
            out.append(tok)
    return out


def accept(work, k=4, n_prompts=64, n_gen=48):
    """Greedy speculative rounds on held-out chat prompts, as the engine runs them: from the last token at P, a
    drafter proposes k tokens, the longest prefix matching the target's own greedy text is accepted plus the
    target's token after it, and P moves past them. Reports drafted, accepted and tokens per target pass."""
    tok = bpe.Tokenizer.from_json(os.path.join(work, "tokenizer.json"))
    chats = json.load(open(os.path.join(work, "heldout-chats.json")))
    random.Random(SEED).shuffle(chats)
    target = load_stage(work, "target", Gemma4(TARGET))
    draft = load_stage(work, "draft", Gemma4(DRAFT))
    assistant = load_stage(work, "assistant", Assistant(ASSISTANT, TARGET))
    stats = {name: {"drafted": 0, "accepted": 0, "rounds": 0} for name in ("draft", "assistant")}
    for q, _ in chats[:n_prompts]:
        prompt = tok.encode(corpus.render_chat(q, "").rsplit("<turn|>", 1)[0])
        seq = prompt + greedy(target, prompt, n_gen)
        with torch.no_grad():
            _, h, kv = target(torch.tensor([seq]))
        emb = (target.embed_tokens * math.sqrt(TARGET.hidden)).detach()
        for name in stats:
            P = len(prompt)  # the target's first own token, the first round's last token
            while P < len(seq) - 1:
                d = (draft_two_model(draft, seq, P, k) if name == "draft" else
                     draft_assistant(assistant, emb, h, kv, seq, P, k))
                d = d[:len(seq) - 1 - P]
                n = 0
                while n < len(d) and d[n] == seq[P + 1 + n]:
                    n += 1
                st = stats[name]
                st["drafted"] += len(d)
                st["accepted"] += n
                st["rounds"] += 1
                P += n + 1
    out = {"k": k, "prompts": n_prompts}
    for name, st in stats.items():
        out[name] = dict(st, acceptance=round(st["accepted"] / st["drafted"], 4),
                         tokens_per_pass=round((st["accepted"] + st["rounds"]) / st["rounds"], 3))
    log(work, "accept", **out)
    with open(os.path.join(work, "accept.json"), "w") as f:
        json.dump(out, f, indent=2)


def plot(work):
    """The training loss of the three models against tokens seen, as docs/demo-model-loss.png."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [json.loads(line) for line in open(os.path.join(work, "log.jsonl"))]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    labels = {"target": "chat model (cross-entropy)", "draft": "two-model drafter (cross-entropy to the target)",
              "assistant": f"assistant drafter (mean over {DRAFT_DEPTH} draft steps)"}
    for stage, label in labels.items():
        pts = {r["step"]: r["loss"] for r in rows if r["stage"] == stage}  # a resumed run logs steps again
        steps = sorted(pts)
        ax.plot([s * BATCH * SEQ / 1e6 for s in steps], [pts[s] for s in steps], label=label)
    ax.set_xlabel("training tokens (millions)")
    ax.set_ylabel("loss (nats per token)")
    ax.set_title("tern demo models: training loss")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(REPO, "docs", "demo-model-loss.png"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stage", choices=["prepare", "target", "draft", "assistant", "export", "eval", "accept", "plot", "all"])
    ap.add_argument("--work", default=os.path.join(REPO, "build", "train-demo"))
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    torch.set_num_threads(a.threads)
    random.seed(SEED)
    stages = {"prepare": prepare, "target": train_target, "draft": train_draft, "assistant": train_assistant,
              "export": export, "eval": evaluate, "accept": accept,
              "plot": plot}
    for name in (list(stages) if a.stage == "all" else [a.stage]):
        stages[name](a.work)


if __name__ == "__main__":
    main()
