/* main.c -- kvtier-sim, the simulator as a program of its own (the CLI calls the library). */
#include "sim.h"

int main(int argc, char **argv)
{
	argv[0] = (char *)"sim";
	return kvt_sim_main(argc, argv);
}
