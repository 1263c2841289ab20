/* commands.h — one entry point per tern verb; each returns the process exit code
 * (0 success, 1 failure reported on stderr, 2 usage error). */
#ifndef TERN_CLI_COMMANDS_H
#define TERN_CLI_COMMANDS_H

int cmd_bench(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_audio_embed(int argc, char **argv);
int cmd_image_embed(int argc, char **argv);
int cmd_audio_features(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_fit(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_spec_trace(int argc, char **argv);
int cmd_get(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_rm(int argc, char **argv);

#endif
