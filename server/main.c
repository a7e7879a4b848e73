/* tensorgate: one binary, subcommands. */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0) {
        fprintf(stderr, "usage: tensorgate validate|inspect|convert|serve|token ...\n");
        return 2;
    }
    fprintf(stderr, "tensorgate: unknown command '%s'\n", argv[1]);
    return 2;
}
