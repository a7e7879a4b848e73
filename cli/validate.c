/* Placeholder until the command lands; replaced by its owner. */
#include <stdio.h>

#include "commands.h"

int tg_cmd_validate(int argc, char **argv)
{
    (void)argc;
    fprintf(stderr, "tensorgate %s: not built yet\n", argv[0]);
    return 2;
}
