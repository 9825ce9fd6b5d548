ALTER TABLE `session_events` ADD `support_agent` text;--> statement-breakpoint
ALTER TABLE `sessions` ADD `support_agent` text;--> statement-breakpoint
ALTER TABLE `sessions` ADD `support_reason` text;--> statement-breakpoint
CREATE INDEX `sessions_support_agent_idx` ON `sessions` (`support_agent`) WHERE "sessions"."support_agent" IS NOT NULL;