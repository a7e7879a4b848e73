/* cmd/: the top layer (docs/ARCHITECTURE.md). main.c and every subcommand of the
 * tensorgate binary: the local file commands work on lib/ alone; serve opens the
 * storage backends, starts the engines (jobs, preloads) and hands the routing table
 * of server/routes/ to the HTTP layer; token, gc and fsck maintain a data directory
 * beside a running server. Nothing below links this folder: the binary is main.o +
 * libtgcmd.a + libtgserver.a + libtensorgate.a. Each command returns the process
 * exit status. */
#ifndef TG_COMMANDS_H
#define TG_COMMANDS_H

/* The one version string, TG_VERSION, lives in lib/st_version.h: `tensorgate
 * --version` prints it and the SARIF reports of the server and the CLI name it. */
#include "st_version.h"

/* A maintenance command's (token, gc, fsck) exit status when --data names a
 * directory that is not a tensorgate data directory; nothing is created. */
#define TG_EXIT_NOT_DATA_DIR 3

/* local file commands (no server) */
int tg_cmd_validate(int argc, char **argv); /* cmd/validate.c */
int tg_cmd_inspect(int argc, char **argv);  /* cmd/inspect.c */
int tg_cmd_convert(int argc, char **argv);  /* cmd/convert.c */
int tg_cmd_sign(int argc, char **argv);     /* cmd/sign.c */
int tg_cmd_verify(int argc, char **argv);   /* cmd/sign.c */

/* the gateway and its maintenance commands */
int tg_cmd_serve(int argc, char **argv); /* cmd/serve.c */
int tg_cmd_token(int argc, char **argv); /* cmd/token.c */
int tg_cmd_gc(int argc, char **argv);    /* cmd/maintenance.c */
int tg_cmd_fsck(int argc, char **argv);  /* cmd/maintenance.c */
int tg_cmd_audit(int argc, char **argv); /* cmd/audit.c */

/* commands that talk to a server through libtgclient (clients/c/tensorgate_client.h) */
int tg_cmd_push(int argc, char **argv); /* cmd/remote.c */
int tg_cmd_pull(int argc, char **argv); /* cmd/remote.c */
/* pull --tensors: a bundle of tensors into one safetensors file (cmd/pull_bundle.c) */
int tg_cmd_pull_bundle(int argc, char **argv);
int tg_cmd_ls(int argc, char **argv);         /* cmd/remote.c */
int tg_cmd_header(int argc, char **argv);     /* cmd/remote.c */
int tg_cmd_tensor(int argc, char **argv);     /* cmd/remote.c */
int tg_cmd_scan(int argc, char **argv);       /* cmd/remote.c */
int tg_cmd_rejections(int argc, char **argv); /* cmd/remote.c */
int tg_cmd_namespace(int argc, char **argv);  /* cmd/remote.c */
int tg_cmd_mirror(int argc, char **argv);     /* cmd/mirror.c */
/* the registry's metadata and life cycle (cmd/registry.c); namespace_all handles
 * `namespace show|quota` and hands `namespace policy` to tg_cmd_namespace */
int tg_cmd_model(int argc, char **argv);         /* cmd/registry.c */
int tg_cmd_models(int argc, char **argv);        /* cmd/registry.c */
int tg_cmd_version(int argc, char **argv);       /* cmd/registry.c */
int tg_cmd_draft(int argc, char **argv);         /* cmd/registry.c */
int tg_cmd_alias(int argc, char **argv);         /* cmd/registry.c */
int tg_cmd_namespace_all(int argc, char **argv); /* cmd/registry.c */

#endif
