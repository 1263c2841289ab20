/* pretok_names.c — the byte-level BPE pre-tokenizers llama.cpp knows by their tokenizer.ggml.pre name, each as
 * the list of regexes llama.cpp applies one after another (every regex splits the pieces the one before left; the
 * matches and the text between them are both kept) and the flags it sets with the name. Written by
 * scripts/pretok/gen_table.py from llama.cpp's src/llama-vocab.cpp as node-llama-cpp 3.22.1 carries it; do not
 * edit by hand. The regexes run on PCRE2 as written, so pieces are what the regexes define (llama.cpp runs most
 * of them through hand-written splitters or std::regex over collapsed text, which agree on ordinary text). */
#include <string.h>

#include "tokenizer/tok_internal.h"

static const char *const RE_AFMOE[] = {
    "\\p{N}{1,3}(?=(?:\\p{N}{3})*(?!\\p{N}))",
    "[一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const RE_BAILINGMOE[] = {
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const RE_BLOOM[] = {
    " ?[^(\\s|.,!?…。，、।۔،)]+",
    NULL};
static const char *const RE_CHAMELEON[] = {
    "<sentinel:[0-9]+>",
    "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
    "([\\t\\n]|    |  )",
    "\\p{N}",
    "[\\p{P}!-/:-@\\[-`{-~]",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    NULL};
static const char *const RE_CODESHELL[] = {
    "\\p{N}",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    NULL};
static const char *const RE_DEEPSEEK3_LLM[] = {
    "\\p{N}{1,3}",
    "[一-龥぀-ゟ゠-ヿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const RE_DEEPSEEK_CODER[] = {
    "[\r\n]",
    "\\s?\\p{L}+",
    "\\s?\\p{P}+",
    "[一-龥ࠀ-一가-퟿]+",
    "\\p{N}",
    NULL};
static const char *const RE_DEEPSEEK_LLM[] = {
    "[\r\n]",
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
    "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
    "\\s+$",
    "[一-龥ࠀ-一가-퟿]+",
    "\\p{N}+",
    NULL};
static const char *const RE_DEFAULT[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|]+",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    "\\p{N}+",
    "[0-9][0-9][0-9]",
    NULL};
static const char *const RE_EXAONE_MOE[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const RE_FALCON[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|`]+",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    "[0-9][0-9][0-9]",
    NULL};
static const char *const RE_GEMMA4[] = {
    "[^\\n]+|[\\n]+",
    NULL};
static const char *const RE_GPT2[] = {
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    NULL};
static const char *const RE_GPT4O[] = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const RE_GRANITE_EMB_MULTI[] = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const RE_JAIS2[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}",
    NULL};
static const char *const RE_KIMI_K2[] = {
    "[\\p{Han}]+|[^\\r\\n\\p{L}\\p{N}]?(?:(?!\\p{Han})[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}])*(?:(?!\\p{Han})[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}])+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?(?:(?!\\p{Han})[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}])+(?:(?!\\p{Han})[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}])*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const RE_LAGUNA[] = {
    "[^\\n]+|[\\n]+",
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const RE_LLAMA3[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const RE_MINICPM5[] = {
    "\\p{N}{1,3}",
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const RE_QWEN2[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const RE_QWEN35[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const RE_SEED_CODER[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const RE_SPARK2_5[] = {
    "\\p{N}{1,3}",
    "[一-龥぀-ゟ゠-ヿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
    "\\p{N}",
    NULL};
static const char *const RE_SUPERBPE[] = {
    "\\p{N}+",
    "(?=(\\d{3})+(?!\\d))",
    NULL};
static const char *const RE_TEKKEN[] = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const RE_TINY_AYA[] = {
    "\\d{1,3}(?=(?:\\d{3})*\\b)",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const RE_UFAKZEKA[] = {
    "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const RE_VIKING[] = {
    " ?[^(\\s|.,!?…。，、।۔،)]+",
    "\\p{N}",
    NULL};
static const char *const RE_WHITESPACE[] = {
    "\\S+",
    NULL};
static const char *const RE_YOUTU[] = {
    "[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};

static const tok_pre_name NAMES[] = {
    {"a.x-4.0", RE_GPT2, 0},
    {"afmoe", RE_AFMOE, 0},
    {"bailingmoe", RE_BAILINGMOE, 0},
    {"bailingmoe2", RE_BAILINGMOE, 0},
    {"bloom", RE_BLOOM, 0},
    {"chameleon", RE_CHAMELEON, TOK_PRE_ADD_BOS},
    {"chatglm-bpe", RE_LLAMA3, TOK_PRE_NO_BOS},
    {"codeshell", RE_CODESHELL, 0},
    {"cohere2moe", RE_TINY_AYA, 0},
    {"command-r", RE_CODESHELL, 0},
    {"dbrx", RE_LLAMA3, 0},
    {"deepseek-coder", RE_DEEPSEEK_CODER, 0},
    {"deepseek-llm", RE_DEEPSEEK_LLM, 0},
    {"deepseek-r1-qwen", RE_QWEN2, 0},
    {"deepseek-v3", RE_DEEPSEEK3_LLM, 0},
    {"default", RE_DEFAULT, 0},
    {"exaone", RE_CODESHELL, 0},
    {"exaone-moe", RE_EXAONE_MOE, 0},
    {"exaone4", RE_GPT2, 0},
    {"f2llmv2", RE_QWEN2, 0},
    {"falcon", RE_FALCON, 0},
    {"falcon-h1", RE_LLAMA3, TOK_PRE_IGNORE_MERGES | TOK_PRE_ADD_BOS},
    {"falcon3", RE_LLAMA3, TOK_PRE_IGNORE_MERGES | TOK_PRE_ADD_BOS},
    {"gemma4", RE_GEMMA4, TOK_PRE_RAW_UTF8 | TOK_PRE_SPACES_AS_METASPACE | TOK_PRE_NEWLINES_WHOLE},
    {"gigachat", RE_GPT2, 0},
    {"glm4", RE_LLAMA3, TOK_PRE_NO_BOS},
    {"gpt-2", RE_GPT2, 0},
    {"gpt-4o", RE_GPT4O, 0},
    {"gpt3-finnish", RE_BLOOM, 0},
    {"granite-docling", RE_GPT2, 0},
    {"granite-embed-multi-311m", RE_GEMMA4, TOK_PRE_RAW_UTF8 | TOK_PRE_SPACES_AS_METASPACE | TOK_PRE_NEWLINES_WHOLE},
    {"granite-embed-multi-97m", RE_GRANITE_EMB_MULTI, TOK_PRE_IGNORE_MERGES},
    {"grok-2", RE_QWEN2, 0},
    {"hunyuan", RE_QWEN2, 0},
    {"hunyuan-dense", RE_DEEPSEEK3_LLM, 0},
    {"hy_v4", RE_DEEPSEEK3_LLM, 0},
    {"jais", RE_GPT2, 0},
    {"jais-2", RE_JAIS2, 0},
    {"jina-de", RE_GPT2, 0},
    {"jina-es", RE_GPT2, 0},
    {"jina-v1-en", RE_GPT2, 0},
    {"jina-v2-code", RE_GPT2, 0},
    {"jina-v2-de", RE_GPT2, 0},
    {"jina-v2-es", RE_GPT2, 0},
    {"jina-v5-nano", RE_LLAMA3, TOK_PRE_IGNORE_MERGES | TOK_PRE_ADD_BOS},
    {"joyai-llm", RE_DEEPSEEK3_LLM, 0},
    {"kanana2", RE_GPT4O, 0},
    {"kimi-k2", RE_KIMI_K2, 0},
    {"kormo", RE_QWEN2, 0},
    {"laguna", RE_LAGUNA, 0},
    {"lfm2", RE_LLAMA3, TOK_PRE_IGNORE_MERGES | TOK_PRE_ADD_BOS},
    {"llada-moe", RE_BAILINGMOE, 0},
    {"llama-bpe", RE_LLAMA3, TOK_PRE_IGNORE_MERGES | TOK_PRE_ADD_BOS},
    {"llama-v3", RE_LLAMA3, TOK_PRE_IGNORE_MERGES | TOK_PRE_ADD_BOS},
    {"llama3", RE_LLAMA3, TOK_PRE_IGNORE_MERGES | TOK_PRE_ADD_BOS},
    {"llama4", RE_GPT4O, 0},
    {"megrez", RE_QWEN2, 0},
    {"mellum", RE_GPT2, 0},
    {"mellum2", RE_CODESHELL, 0},
    {"midm-2.0", RE_LLAMA3, TOK_PRE_IGNORE_MERGES | TOK_PRE_ADD_BOS},
    {"minerva-7b", RE_CODESHELL, 0},
    {"minicpm5", RE_MINICPM5, TOK_PRE_IGNORE_MERGES},
    {"minimax-m2", RE_GPT4O, 0},
    {"modern-bert", RE_GPT2, 0},
    {"mpt", RE_GPT2, 0},
    {"olmo", RE_GPT2, 0},
    {"phi-2", RE_GPT2, 0},
    {"pixtral", RE_LLAMA3, TOK_PRE_IGNORE_MERGES | TOK_PRE_ADD_BOS},
    {"poro-chat", RE_BLOOM, 0},
    {"qwen2", RE_QWEN2, 0},
    {"qwen35", RE_QWEN35, 0},
    {"refact", RE_CODESHELL, 0},
    {"roberta-bpe", RE_GPT2, 0},
    {"sarvam-moe", RE_GEMMA4, TOK_PRE_RAW_UTF8 | TOK_PRE_SPACES_AS_METASPACE},
    {"seed-coder", RE_SEED_CODER, 0},
    {"smaug-bpe", RE_LLAMA3, 0},
    {"smollm", RE_CODESHELL, 0},
    {"solar-open", RE_QWEN2, 0},
    {"spark2_5", RE_SPARK2_5, 0},
    {"stablelm2", RE_QWEN2, 0},
    {"starcoder", RE_CODESHELL, 0},
    {"superbpe", RE_SUPERBPE, 0},
    {"talkie", RE_GPT4O, 0},
    {"tekken", RE_TEKKEN, TOK_PRE_IGNORE_MERGES | TOK_PRE_ADD_BOS},
    {"tiny_aya", RE_TINY_AYA, 0},
    {"trillion", RE_GPT2, 0},
    {"ufakzeka", RE_UFAKZEKA, 0},
    {"viking", RE_VIKING, 0},
    {"whitespace", RE_WHITESPACE, TOK_PRE_RAW_UTF8},
    {"youtu", RE_YOUTU, TOK_PRE_IGNORE_MERGES},
};

const tok_pre_name *tok_pre_by_name(const char *name) {
    if (!name || !*name)
        name = "default";
    for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++)
        if (!strcmp(NAMES[i].name, name))
            return &NAMES[i];
    return NULL;
}
