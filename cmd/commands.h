/* Subcommands of the tensorgate binary. Each returns the process exit status. */
#ifndef TG_COMMANDS_H
#define TG_COMMANDS_H

/* cli/: local file commands (no server) */
int tg_cmd_validate(int argc, char **argv); /* cmd/validate.c */
int tg_cmd_inspect(int argc, char **argv);  /* cmd/inspect.c */
int tg_cmd_convert(int argc, char **argv);  /* cmd/convert.c */

/* server/: the gateway and its maintenance commands */
int tg_cmd_serve(int argc, char **argv); /* cmd/serve.c */
int tg_cmd_token(int argc, char **argv); /* cmd/serve.c */
int tg_cmd_gc(int argc, char **argv);    /* cmd/serve.c */
int tg_cmd_fsck(int argc, char **argv);  /* cmd/serve.c */

#endif
