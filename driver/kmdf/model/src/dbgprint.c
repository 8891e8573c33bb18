/* DbgPrint for the KMDF model: a variadic export, which stable Rust cannot define. It formats
 * as the kernel's would (the driver passes "%s" and one string) and hands the text to the
 * model (hcabus_model_dbg_print in wdm.rs). Built only for the Linux host tests (wdk_fake). */
#include <stdarg.h>
#include <stdio.h>

void hcabus_model_dbg_print(const char *text);

unsigned long DbgPrint(const char *format, ...)
{
    char text[1024];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof text, format, args);
    va_end(args);
    hcabus_model_dbg_print(text);
    return 0;
}
