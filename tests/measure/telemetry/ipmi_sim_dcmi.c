/*
 * DCMI "Get Power Reading" for OpenIPMI's ipmi_sim, loaded with `loadlib` from lan.conf (tests/measure/
 * bmc_emulators.py compiles it against Debian's libopenipmi-dev headers). ipmi_sim answers no DCMI command of its
 * own (0xC1, invalid command); this module is the one part of that emulator that is ours: ipmi_sim still does the
 * RMCP+ session, authentication and message routing, and this answers group extension 0xDC, command 0x02, as
 * DCMI 1.5 (table 6-16) lays it out, with the power the test writes to the file named in the module's options.
 *
 * Response: completion code, group extension 0xDC, current / minimum / maximum / average power (W, 2 bytes each,
 * least significant first), timestamp (4), statistics reporting period in ms (4), power reading state (bit 6:
 * measurement active). Minimum, maximum and average are the current reading: the tests read the current power,
 * which is what benchlib's IPMI reader reads.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <OpenIPMI/serv.h>
#include <OpenIPMI/mcserv.h>

#define DCMI_GROUP 0xdc
#define DCMI_GET_POWER_READING 0x02
#define PERIOD_MS 1000

static char *power_file;

static void put16(unsigned char *at, unsigned int v) { at[0] = v & 0xff; at[1] = (v >> 8) & 0xff; }

static void put32(unsigned char *at, unsigned long v)
{
    at[0] = v & 0xff; at[1] = (v >> 8) & 0xff; at[2] = (v >> 16) & 0xff; at[3] = (v >> 24) & 0xff;
}

static void dcmi(lmc_data_t *mc, msg_t *msg, unsigned char *rdata, unsigned int *rdata_len, void *cb_data)
{
    FILE *f;
    double watts = 0;
    unsigned int w;

    (void) cb_data;
    if (msg->cmd != DCMI_GET_POWER_READING) {
        handle_invalid_cmd(mc, rdata, rdata_len);
        return;
    }
    f = fopen(power_file, "r");
    if (f) {
        if (fscanf(f, "%lf", &watts) != 1)
            watts = 0;
        fclose(f);
    }
    w = watts < 0 ? 0 : (unsigned int) (watts + 0.5);
    rdata[0] = 0;
    rdata[1] = DCMI_GROUP;
    put16(rdata + 2, w);
    put16(rdata + 4, w);
    put16(rdata + 6, w);
    put16(rdata + 8, w);
    put32(rdata + 10, (unsigned long) time(NULL));
    put32(rdata + 14, PERIOD_MS);
    rdata[18] = 0x40;
    *rdata_len = 19;
}

int ipmi_sim_module_init(sys_data_t *sys, const char *options)
{
    (void) sys;
    power_file = strdup(options ? options : "");
    ipmi_emu_register_group_extension_handler(DCMI_GROUP, dcmi, NULL);
    return 0;
}
