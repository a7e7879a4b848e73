/* cmd/: the top layer (docs/ARCHITECTURE.md). main.c and every subcommand of the
 * tensorgate binary: the local file commands work on lib/ alone; serve opens the
 * storage backends, starts the engines (jobs, preloads) and hands the routing table
 * of server/routes/ to the HTTP layer; token, gc and fsck maintain a data directory
 * beside a running server. Nothing below links this folder: the binary is main.o +
 * libtgcmd.a + libtgserver.a + libtensorgate.a. Each command returns the process
 * exit status. */
#ifndef TG_COMMANDS_H
#define TG_COMMANDS_H

/* The one version string: `tensorgate --version` prints it (the API's own version
 * is openapi.yaml's info.version). A build may override it: make CFLAGS+=-DTG_VERSION=... */
#ifndef TG_VERSION
#define TG_VERSION "1.0.0"
#endif

/* A maintenance command's (token, gc, fsck) exit status when --data names a
 * directory that is not a tensorgate data directory; nothing is created. */
#define TG_EXIT_NOT_DATA_DIR 3

/* local file commands (no server) */
int tg_cmd_validate(int argc, char **argv); /* cmd/validate.c */
int tg_cmd_inspect(int argc, char **argv);  /* cmd/inspect.c */
int tg_cmd_convert(int argc, char **argv);  /* cmd/convert.c */

/* the gateway and its maintenance commands */
int tg_cmd_serve(int argc, char **argv); /* cmd/serve.c */
int tg_cmd_token(int argc, char **argv); /* cmd/token.c */
int tg_cmd_gc(int argc, char **argv);    /* cmd/maintenance.c */
int tg_cmd_fsck(int argc, char **argv);  /* cmd/maintenance.c */

/* commands that talk to a server through libtgclient (clients/c/tensorgate_client.h) */
int tg_cmd_push(int argc, char **argv);      /* cmd/remote.c */
int tg_cmd_pull(int argc, char **argv);      /* cmd/remote.c */
int tg_cmd_ls(int argc, char **argv);        /* cmd/remote.c */
int tg_cmd_header(int argc, char **argv);    /* cmd/remote.c */
int tg_cmd_tensor(int argc, char **argv);    /* cmd/remote.c */
int tg_cmd_scan(int argc, char **argv);      /* cmd/remote.c */
int tg_cmd_namespace(int argc, char **argv); /* cmd/remote.c */

#endif
