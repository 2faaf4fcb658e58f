/* A hog that only executes PAUSE: busy without using the core's execution units. */
int main(){ for(;;) __builtin_ia32_pause(); }
