/* The one version string of tensorgate: `tensorgate --version` prints it and the SARIF
 * reports (st_sarif.h) name it as the tool's version, from the server and the CLI alike
 * (the API's own version is openapi.yaml's info.version). A build may override it:
 * make CFLAGS+=-DTG_VERSION=... */
#ifndef ST_VERSION_H
#define ST_VERSION_H

#ifndef TG_VERSION
#define TG_VERSION "1.0.0"
#endif

#endif
