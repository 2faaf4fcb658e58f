/* The load-1 hog of `schedkit experiment exclusive`: xorshift arithmetic over 64 KiB, forever. */
#include <stdlib.h>
int main(){ size_t w=64*1024/8; unsigned long *v=malloc(w*8); for(size_t i=0;i<w;i++)v[i]=1; size_t i=0; unsigned long x=0x9E3779B97F4A7C15UL;
 for(;;){ x^=x<<13; x^=x>>7; x^=x<<17; v[i]=v[i]*3+x; i+=8; if(i>=w) i=(i+1)%8; } }
