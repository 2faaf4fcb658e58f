/* The strided walk of `schedkit experiment exclusive`, alone: prints its wall time (bench/exclusive-floor/run.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(){ size_t n=5*1000*1000; unsigned char*a=calloc(n,1); size_t i=0; unsigned long s=0;
 struct timespec t0,t1; clock_gettime(CLOCK_MONOTONIC,&t0);
 for(long k=0;k<300000000L;k++){ s+=a[i]++; i+=4160; if(i>=n) i-=n; }
 clock_gettime(CLOCK_MONOTONIC,&t1); printf("%.4f %lu\n",(t1.tv_sec-t0.tv_sec)+(t1.tv_nsec-t0.tv_nsec)/1e9,s); return 0;}
