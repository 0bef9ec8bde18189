-- Where a registered process is (runtime/proc.py): BOOT_ID:PID_NAMESPACE:START_TICKS, so that
-- `cronlab chaos` signals a pid only on the machine, boot and PID namespace it is a number in,
-- and only the process that started then (NULL: not known; chaos then signals nothing).
ALTER TABLE processes ADD COLUMN place TEXT;
