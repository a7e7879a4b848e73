/* Placeholder until the server lands; replaced by its owner. */
#include <stdio.h>

#include "commands.h"

static int not_built(char **argv)
{
    fprintf(stderr, "tensorgate %s: not built yet\n", argv[0]);
    return 2;
}

int tg_cmd_serve(int argc, char **argv)
{
    (void)argc;
    return not_built(argv);
}

int tg_cmd_token(int argc, char **argv)
{
    (void)argc;
    return not_built(argv);
}

int tg_cmd_gc(int argc, char **argv)
{
    (void)argc;
    return not_built(argv);
}

int tg_cmd_fsck(int argc, char **argv)
{
    (void)argc;
    return not_built(argv);
}
