/* mapping_faults.h — what the tern binary does when a file it has mapped is cut short under it. */
#ifndef TERN_CLI_MAPPING_FAULTS_H
#define TERN_CLI_MAPPING_FAULTS_H

/* Installs a SIGBUS handler: a fault inside a mapped model or cache file (core/mapped_files.h) prints which file
 * changed and what to do, then exits with status 74 (EX_IOERR); any other SIGBUS ends the process as before. */
void cli_report_mapping_faults(void);

#endif
